// The OpenAPI document is generated from schema.ts and routes.ts: it documents every route, and a generator or a
// reader can follow every reference in it.
import { describe, expect, it } from 'vitest';
import { openApiDocument } from './openapi.js';
import { ROUTES, WEBSOCKET_ROUTES } from './routes.js';

interface Operation {
  operationId: string;
  parameters?: { name: string; in: string; required: boolean }[];
  requestBody?: { required: boolean; content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: { $ref?: string } }> }>;
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Record<string, unknown>>; securitySchemes: Record<string, unknown> };
  security: Record<string, unknown>[];
}

const document = JSON.parse(JSON.stringify(openApiDocument())) as Document;
const openApiPath = (pattern: string) => pattern.replace(/:(\w+)/g, '{$1}');

function refs(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((item) => refs(item, found));
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string') found.push(item);
      else refs(item, found);
    }
  }
  return found;
}

describe('OpenAPI document', () => {
  it('is OpenAPI 3.1 and survives a JSON round trip unchanged', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document).toEqual(openApiDocument());
  });

  it('documents every route with its path parameters, body and responses', () => {
    for (const route of ROUTES) {
      const operation = document.paths[openApiPath(route.path)]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation!.operationId).toBe(route.operation);
      const names = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]);
      expect((operation!.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name)).toEqual(names);
      expect(Boolean(operation!.requestBody)).toBe(Boolean(route.request));
      expect(operation!.responses[route.status]).toBeDefined();
      expect(operation!.responses['4XX']).toEqual({ $ref: '#/components/responses/Error' });
      expect(operation!.responses['5XX']).toEqual({ $ref: '#/components/responses/Error' });
    }
    for (const ws of WEBSOCKET_ROUTES)
      expect(document.paths[openApiPath(ws.path)]?.get?.responses['101']).toBeDefined();
    const operations = Object.values(document.paths).flatMap((item) => Object.keys(item));
    expect(operations).toHaveLength(ROUTES.length + WEBSOCKET_ROUTES.length);
  });

  it('names request and response bodies by their schema ids', () => {
    const checkpoint = document.paths['/api/v1/vms/{vm}/checkpoint']!.post!;
    expect(checkpoint.requestBody).toEqual({
      required: false,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/CheckpointRequest' } } },
    });
    expect(checkpoint.responses['201']!.content!['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/Snapshot',
    });
    expect(document.paths['/api/v1/episodes']!.post!.requestBody!.required).toBe(true);
    expect(document.paths['/api/v1/vms/{vm}/network']!.get!.parameters).toContainEqual(
      expect.objectContaining({ name: 'after', in: 'query', required: false }),
    );
    expect(document.paths['/api/v1/vms/{vm}/logs']!.get!.parameters).toContainEqual(
      expect.objectContaining({ name: 'tail', in: 'query', required: false }),
    );
  });

  it('has a component for every schema id, and every reference resolves', () => {
    const schemas = document.components.schemas;
    for (const id of [
      ...['Vm', 'Episode', 'Snapshot', 'Error', 'EngineEvent', 'ForkRequest', 'CreateEpisodeResponse'],
      ...['VmNetwork', 'PortForward', 'NetworkRefusal'],
    ]) {
      expect(schemas[id], id).toBeDefined();
    }
    for (const ref of refs(document)) {
      const [, section, name] = /^#\/components\/(schemas|responses)\/(.+)$/.exec(ref) ?? [];
      expect((document.components as Record<string, Record<string, unknown>>)[section!]?.[name!], ref).toBeDefined();
    }
    // A request is documented as what it accepts: count has a default, so it may be left out.
    expect(schemas.ForkRequest!.required).toBeUndefined();
    expect(schemas.Vm!.required).toContain('state');
  });

  it('asks for the token (bearer, query or cookie) and says the Unix socket needs none', () => {
    expect(Object.keys(document.components.securitySchemes)).toEqual(['bearerToken', 'tokenQuery', 'tokenCookie']);
    expect(document.components.securitySchemes.bearerToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(JSON.stringify(document.components.securitySchemes.bearerToken)).toMatch(/Unix socket needs none/);
    expect(document.security).toEqual([{ bearerToken: [] }, { tokenQuery: [] }, { tokenCookie: [] }]);
  });
});
