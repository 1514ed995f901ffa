// Tier 4 (TESTING.md): a networked VM's ports and refused connections as a person sees them, in Debian's Chromium
// against a real engine: the `net` tiny guest (native/guests/net.c) with a pinned forward of guest port 80 and a lone
// guest port 22, sending SYNs to host.smol.internal on a port its policy refuses. The toolbar shows both forwards, the
// web one as a link to http://127.0.0.1:PORT/ that opens in a new tab, and a count of refused connections that opens
// their list. Every packet stays on 127.0.0.1.
import net from 'node:net';
import { describe, expect } from 'vitest';
import { newEpisode, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('a networked VM in the UI', () => {
  let pinned = 0;
  let refused = 0;
  let vmName = '';
  const network = () => ui.page.getByRole('group', { name: `Network of ${vmName}` });

  step('shows the forwarded ports in the toolbar, the web one as a link', async () => {
    const { page } = ui;
    [pinned, refused] = [await freePort(), await freePort()];
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const smolfile = ui.smolfile(
      'netted',
      'net',
      [`cmdline = "ports=${refused}"`, 'net = true', `ports = ["${pinned}:80", "22"]`].join('\n'),
    );
    const episode = await newEpisode(ui, smolfile);
    vmName = episode.vms[0]!.name;
    const vm = await until(
      'the VM to list its forwards',
      async () => (await ui.episodes()).find((e) => e.id === episode.id)?.vms[0],
      (v) => v?.ports.length === 2,
    );
    const ssh = vm!.ports[1]!;
    const link = network().getByRole('link', { name: `80 → 127.0.0.1:${pinned} ↗` });
    await visible(link);
    expect(await link.getAttribute('href')).toBe(`http://127.0.0.1:${pinned}/`);
    expect(await link.getAttribute('target')).toBe('_blank');
    await visible(network().getByText(`22 → 127.0.0.1:${ssh.host}`, { exact: true }));
    expect(await network().getByRole('link').count()).toBe(1);
  });

  step('counts refused connections and lists them', async () => {
    const { page } = ui;
    const badge = network().getByRole('button', { name: /refused$/ });
    await until(
      'a refused connection counted',
      () => badge.innerText(),
      (text) => Number(text.split(' ')[0]) >= 1,
    );
    await badge.click();
    const list = page.getByRole('region', { name: `Refused connections of ${vmName}` });
    const row = list
      .getByRole('row')
      .filter({ hasText: `10.0.2.2:${refused}` })
      .first();
    await visible(row);
    expect(await row.innerText()).toMatch(/tcp\s+host/);
    // The VM's tab says it too.
    const tab = page.getByRole('tab', { name: `VM ${vmName}` });
    expect(await tab.innerText()).toMatch(/2 ports[\s\S]*\d+ refused/);
    await ui.shot('network-01-ports-and-refusals');
  });

  step('the port link opens http://127.0.0.1:PORT/ in a new tab', async () => {
    const { page } = ui;
    const url = `http://127.0.0.1:${pinned}/`;
    const before = page.url();
    // The guest serves nothing on its port 80, so the new tab's page never loads: its request to the forward is what
    // shows that the link opened it (a noopener tab has no opener, so Playwright reports it late, if at all).
    const [request] = await Promise.all([
      page.context().waitForEvent('request', { predicate: (r) => r.url() === url }),
      network()
        .getByRole('link', { name: `80 → 127.0.0.1:${pinned} ↗` })
        .click(),
    ]);
    expect(request.isNavigationRequest()).toBe(true);
    expect(page.url()).toBe(before);
    for (const other of page.context().pages()) if (other !== page) await other.close();
    expect(ui.pageErrors).toEqual([]);
  });
});
