// The OpenAPI 3.1 document of the API (GET /api/v1/openapi.json, `smol api openapi`), generated from the schemas
// (schema.ts) and the route table (routes.ts), so it cannot drift from what the server accepts and answers.
import { z } from 'zod';
import { ROUTES, WEBSOCKET_ROUTES, type Route } from './routes.js';
import * as schemas from './schema.js';
import * as smolfileSchemas from './smolfile-schema.js';
import { Ref } from './schema.js';

type Json = Record<string, unknown>;

const componentRef = (id: string) => `#/components/schemas/${id}`;
const idOf = (schema: z.ZodType): string | undefined => z.globalRegistry.get(schema)?.id;

/** A JSON Schema without the keywords a component or an inline schema in the document does not want. */
function bare(json: Json): Json {
  const { $schema: _schema, $id: _id, ...rest } = json;
  return rest;
}

/**
 * Every schema of schema.ts and smolfile-schema.ts that has a `.meta({ id })`, as components. Request bodies are converted as the input
 * they accept (a field with a default is optional), everything else as the output the engine sends.
 */
function components(): Record<string, Json> {
  const requestIds = new Set(ROUTES.flatMap((route) => (route.request ? [idOf(route.request)] : [])));
  const registries = { input: z.registry<{ id: string }>(), output: z.registry<{ id: string }>() };
  for (const value of [...Object.values(schemas), ...Object.values(smolfileSchemas)]) {
    if (!(value instanceof z.ZodType)) continue;
    const id = idOf(value);
    if (id) registries[requestIds.has(id) ? 'input' : 'output'].add(value, { id });
  }
  const result: Record<string, Json> = {};
  for (const io of ['input', 'output'] as const) {
    const converted = z.toJSONSchema(registries[io], { io, uri: componentRef, target: 'draft-2020-12' });
    for (const [id, json] of Object.entries(converted.schemas)) result[id] = bare(json as Json);
  }
  return Object.fromEntries(Object.entries(result).sort(([a], [b]) => a.localeCompare(b)));
}

/** A component's $ref, or the schema inline when it has no id. */
function schemaOf(schema: z.ZodType, io: 'input' | 'output'): Json {
  const id = idOf(schema);
  return id ? { $ref: componentRef(id) } : bare(z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as Json);
}

/** `/api/v1/vms/:vm` → `/api/v1/vms/{vm}` and its parameter names. */
function openApiPath(pattern: string): { path: string; names: string[] } {
  const names = [...pattern.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  return { path: pattern.replace(/:(\w+)/g, '{$1}'), names };
}

function pathParameters(names: string[]): Json[] {
  const schema = schemaOf(Ref, 'input');
  return names.map((name) => ({
    name,
    in: 'path',
    required: true,
    description: `the ${name}: ${Ref.description}`,
    schema,
  }));
}

function queryParameters(route: Route): Json[] {
  return Object.entries(route.query?.shape ?? {}).map(([name, field]) => {
    const schema = field as z.ZodType;
    return {
      name,
      in: 'query',
      required: !schema.safeParse(undefined).success,
      ...(schema.description ? { description: schema.description } : {}),
      schema: schemaOf(schema, 'input'),
    };
  });
}

const parameters = (list: Json[]) => (list.length ? { parameters: list } : {});

const STATUS_TEXT = { 200: 'OK', 201: 'Created', 202: 'Accepted: the engine is stopping', 204: 'Done, no content' };

function operation(route: Route, names: string[]): Json {
  const success: Json = { description: STATUS_TEXT[route.status] };
  if (route.response) success.content = { [route.contentType]: { schema: schemaOf(route.response, 'output') } };
  const requestBody = route.request && {
    required: !route.request.safeParse({}).success,
    content: { 'application/json': { schema: schemaOf(route.request, 'input') } },
  };
  return {
    operationId: route.operation,
    summary: route.summary,
    ...parameters([...pathParameters(names), ...queryParameters(route)]),
    ...(requestBody ? { requestBody } : {}),
    responses: {
      [route.status]: success,
      '4XX': { $ref: '#/components/responses/Error' },
      '5XX': { $ref: '#/components/responses/Error' },
    },
  };
}

function webSocketOperation(ws: (typeof WEBSOCKET_ROUTES)[number], names: string[]): Json {
  return {
    operationId: ws.operation,
    summary: `WebSocket: ${ws.summary}`,
    ...parameters(pathParameters(names)),
    responses: {
      101: { description: 'Switching Protocols: the WebSocket is open' },
      '4XX': { $ref: '#/components/responses/Error' },
    },
    ...(ws.operation === 'events' ? { 'x-websocket-message': { $ref: componentRef('EngineEvent') } } : {}),
  };
}

let cached: Json | null = null;

/** The OpenAPI 3.1 document: every route with its parameters, body, responses and the security scheme. */
export function openApiDocument(): object {
  if (cached) return cached;
  const paths: Record<string, Json> = {};
  const at = (pattern: string) => {
    const { path, names } = openApiPath(pattern);
    return { item: (paths[path] ??= {}), names };
  };
  for (const route of ROUTES) {
    const { item, names } = at(route.path);
    item[route.method.toLowerCase()] = operation(route, names);
  }
  for (const ws of WEBSOCKET_ROUTES) {
    const { item, names } = at(ws.path);
    item.get = webSocketOperation(ws, names);
  }
  cached = {
    openapi: '3.1.0',
    info: {
      title: 'Smol Studio engine API',
      version: 'v1',
      description:
        'The engine of one data dir (docs/engine.md, "API"). HTTP/1.1 JSON and WebSocket on SMOL_HOME/engine.sock, ' +
        'a Unix socket whose mode 0600 is its protection (no token), and with `smol serve` on a TCP listener that ' +
        'needs the token. Errors are {"error":{"code","message"}}: 400 malformed (which field and why), 401 no or ' +
        'wrong token, 403 foreign Origin, 404 unknown id, 409 wrong state, 500 the engine failed.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    servers: [{ url: '/', description: 'the Unix socket SMOL_HOME/engine.sock, or http://HOST:PORT of smol serve' }],
    security: [{ bearerToken: [] }, { tokenQuery: [] }, { tokenCookie: [] }],
    paths,
    components: {
      schemas: components(),
      responses: {
        Error: {
          description: 'The request failed: the code repeats the HTTP status, the message says why',
          content: { 'application/json': { schema: { $ref: componentRef('Error') } } },
        },
      },
      securitySchemes: {
        bearerToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'The token smol serve prints, on the TCP listener only; the Unix socket needs none',
        },
        tokenQuery: {
          type: 'apiKey',
          in: 'query',
          name: 'token',
          description: 'The token, for page URLs and WebSockets',
        },
        tokenCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'smol_token',
          description: 'The token, as the page sets it',
        },
      },
    },
  };
  return cached;
}
