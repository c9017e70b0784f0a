// The dashboard driven in a real browser (Debian's Chromium through
// playwright-core), against a running gatehouse. cmd/gatehouse's
// TestDashboardInBrowser starts the gateway and runs this script; by hand:
//
//   GATEHOUSE_URL=http://127.0.0.1:8080 ADMIN_KEY=… MODEL=demo-chat PROJECT=demo node web/e2e/dashboard.mjs
//
// It walks an operator's day: log in; create a key and read its secret
// once; send traffic with it (plain, streamed, and one refused by its
// limit); find that traffic on the overview and in the request log with
// the right model, status and cost; revoke the key and see the next
// request refused; log out. Any console error on any page fails it. A
// screenshot of each page goes to OUT_DIR.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const base = process.env.GATEHOUSE_URL ?? 'http://127.0.0.1:8080';
const adminKey = process.env.ADMIN_KEY ?? 'gh-admin-demo';
const model = process.env.MODEL ?? 'demo-chat';
const project = process.env.PROJECT ?? 'demo';
const out = process.env.OUT_DIR ?? 'test-results/screenshots';
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
mkdirSync(out, { recursive: true });

const problems = [];
const step = (name) => console.log(`dashboard: ${name}`);

// waitUntil retries fn (which throws while its condition is unmet) for up
// to ms: usage records reach the database in batches, a second or so
// after the request.
async function waitUntil(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      last = e;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${last.message}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function chat(key, body) {
  const resp = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello from the dashboard test.' }], ...body }),
  });
  const text = await resp.text();
  return {
    status: resp.status,
    text,
    id: resp.headers.get('x-gatehouse-request-id'),
    cost: resp.headers.get('x-gatehouse-cost-usd'),
  };
}

const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
try {
  // The refused login's 401 is the point of that step, not a fault: while
  // it may still be reported, that one message is expected.
  let refusedLogin = false;
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (refusedLogin && m.text().includes('status of 401')) return;
    problems.push(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`uncaught exception on ${page.url()}: ${e.message}`));
  const shot = (name) => page.screenshot({ path: join(out, `${name}.png`), fullPage: true });
  const go = async (title) => {
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: title, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: title }).waitFor();
  };

  step('log in');
  await page.goto(`${base}/ui/`);
  refusedLogin = true;
  await page.getByLabel('Admin key').fill('not-the-admin-key');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('alert').filter({ hasText: 'Incorrect admin key' }).waitFor();
  await shot('login');
  await page.getByLabel('Admin key').fill(adminKey);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  refusedLogin = false;
  await shot('overview-empty');

  step('create a key');
  await go('Keys');
  await page.getByRole('button', { name: 'New key' }).click();
  await page.getByLabel('Name', { exact: true }).fill('browser-test');
  await page.getByLabel('Project', { exact: true }).selectOption({ label: project });
  await page.getByLabel(/Requests per minute/).fill('2');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secretBox = page.getByTestId('secret');
  await secretBox.waitFor();
  const secret = (await secretBox.textContent()).trim();
  assert.match(secret, /^gh-/, 'the new key’s secret is shown');
  await shot('keys-secret');
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByRole('row', { name: /browser-test/ }).waitFor();
  assert.ok(!(await page.content()).includes(secret), 'the secret is shown once, then never again');
  await page.reload();
  await page.getByRole('row', { name: /browser-test/ }).waitFor();
  assert.ok(!(await page.content()).includes(secret), 'the secret is not in the key list');
  const search = page.getByRole('searchbox', { name: 'Search keys' });
  await search.fill('zzz-no-such-key');
  await page.getByText('No key matches “zzz-no-such-key”.').waitFor();
  await search.fill('BROWSER');
  await page.getByRole('row', { name: /browser-test/ }).waitFor();
  assert.equal(await page.locator('tr[data-key-id]').count(), 1, 'the search finds the one key named so');
  await search.fill('');

  step('send traffic');
  const plain = await chat(secret, {});
  assert.equal(plain.status, 200, `plain request: ${plain.text}`);
  const streamed = await chat(secret, { stream: true, stream_options: { include_usage: true } });
  assert.equal(streamed.status, 200, `streamed request: ${streamed.text}`);
  assert.match(streamed.text, /data: \[DONE\]/);
  const refused = await chat(secret, {});
  assert.equal(refused.status, 429, `third request within a minute of a 2 rpm key: ${refused.text}`);
  assert.ok(Number(plain.cost) > 0, `the plain request has a cost (${plain.cost})`);

  step('overview shows the traffic');
  await go('Overview');
  await waitUntil('three requests on the overview', async () => {
    await page.getByRole('button', { name: 'Refresh' }).click();
    const n = await page.getByTestId('total-requests').textContent({ timeout: 2000 });
    assert.ok(Number(n.replace(/,/g, '')) >= 3, `total requests ${n}`);
  });
  // Each chart draws once its box has a width: they appear one by one.
  await waitUntil('the overview\'s charts', async () => {
    assert.ok((await page.locator('.chart canvas').count()) >= 7, 'the overview draws its seven charts, latency and time to first token among them');
  }, 10000);
  assert.match(await page.getByTestId('latency').textContent(), /^\d[\d.]* m?s \/ \d[\d.]* m?s$/, 'the overview shows latency percentiles');
  await page.getByLabel('Model').selectOption(model);
  await page.getByRole('radio', { name: 'Last hour' }).check();
  await waitUntil('the filtered overview', async () => {
    await page.locator('.overview[aria-busy="false"]').waitFor({ timeout: 2000 });
    const n = await page.getByTestId('total-requests').textContent({ timeout: 2000 });
    assert.ok(Number(n) >= 3, `requests to ${model} in the last hour: ${n}`);
  });
  assert.match(page.url(), /range=hour/, 'the range is in the URL, so the view can be bookmarked');
  await shot('overview');

  step('request log shows each request');
  await go('Request log');
  const row = (id) => page.locator(`tr[data-request-id="${id}"]`);
  for (const [r, status] of [[plain, 200], [streamed, 200], [refused, 429]]) {
    await waitUntil(`request ${r.id} in the log`, async () => {
      if (!(await row(r.id).isVisible())) {
        await page.getByRole('button', { name: 'Apply' }).click();
        await row(r.id).waitFor({ timeout: 2000 });
      }
    });
    const text = await row(r.id).textContent();
    assert.ok(text.includes(model), `row of ${r.id} names the model: ${text}`);
    assert.ok(text.includes(String(status)), `row of ${r.id} has status ${status}: ${text}`);
    // The cost shown is the record's; for the plain request it is also
    // what the response's x-gatehouse-cost-usd header said (a stream's
    // cost is known only after its headers).
    const rec = await (await fetch(`${base}/admin/logs/${r.id}`, { headers: { Authorization: `Bearer ${adminKey}` } })).json();
    const want = r.cost ?? rec.cost_usd;
    assert.equal(Number(rec.cost_usd), Number(want), `record of ${r.id}: cost ${rec.cost_usd}, header ${r.cost}`);
    if (status === 200) assert.ok(Number(want) > 0, `request ${r.id} cost something`);
    const cell = (await row(r.id).locator('td').nth(5).textContent()).trim();
    assert.ok(Math.abs(Number(cell.replace('$', '')) - Number(want)) < 1e-9, `row of ${r.id} shows the cost ${want}: ${cell}`);
  }
  await row(plain.id).getByRole('button').click();
  await page.getByRole('heading', { name: `Request ${plain.id}` }).waitFor();
  await page.getByLabel('Status').fill('429');
  await page.getByRole('button', { name: 'Apply' }).click();
  await waitUntil('the 429 filter', async () => {
    assert.equal(await page.locator('tr[data-request-id]').count(), 1);
    await row(refused.id).waitFor({ timeout: 1000 });
  });
  await shot('logs');

  step('the other pages');
  for (const [title, name] of [['Projects', 'projects'], ['Providers', 'providers'], ['API reference', 'api']]) {
    await go(title);
    await page.waitForLoadState('networkidle');
    await shot(name);
  }
  await page.getByRole('link', { name: /POST \/admin\/keys$/ }).first().waitFor();
  await page.getByRole('link', { name: /POST \/v1\/chat\/completions$/ }).first().waitFor();

  step('phone width and dark mode');
  await page.setViewportSize({ width: 390, height: 844 });
  await go('Overview');
  await page.getByTestId('total-requests').waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the overview fits a phone's width (overflows by ${overflow}px)`);
  await shot('overview-phone');
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.setViewportSize({ width: 1280, height: 900 });
  await shot('overview-dark');
  await page.emulateMedia({ colorScheme: 'light' });

  step('keyboard');
  await page.reload();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content', 'the first Tab reaches the skip link');
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert.notEqual(outline, 'none', 'the focused element shows its focus');

  step('revoke the key');
  await go('Keys');
  await page.getByRole('button', { name: 'Revoke browser-test' }).click();
  const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
  await dialog.waitFor();
  await shot('keys-revoke');
  await dialog.getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('status').filter({ hasText: 'Revoked key' }).waitFor();
  const after = await chat(secret, {});
  assert.equal(after.status, 401, `a request with the revoked key: ${after.text}`);

  step('log out');
  const cookie = (await context.cookies()).find((c) => c.name === 'gatehouse_session');
  assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', 'the session cookie is HttpOnly and SameSite=Strict');
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByLabel('Admin key').waitFor();
  const replay = await fetch(`${base}/admin/keys`, { headers: { Cookie: `gatehouse_session=${cookie.value}` } });
  assert.equal(replay.status, 401, 'the session cookie no longer opens the admin API after logout');
  await page.reload();
  await page.getByLabel('Admin key').waitFor();

  if (problems.length) throw new Error('the browser reported problems:\n' + problems.join('\n'));
  step(`passed; screenshots in ${out}`);
} catch (e) {
  // What the page showed when it failed, and what it had logged.
  await page.screenshot({ path: join(out, 'failure.png'), fullPage: true }).catch(() => {});
  console.error(`dashboard: failed on ${page.url()}; screenshot ${join(out, 'failure.png')}`);
  if (problems.length) console.error(problems.join('\n'));
  throw e;
} finally {
  await browser.close();
}
