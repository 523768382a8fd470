// The prebuilt extension (workbench/labextension, committed), loaded the way JupyterLab
// loads it: its remoteEntry registers a module-federation container, which is given a shared
// @lumino/widgets and asked for './mimeExtension' and './style'. Run after `npm run build`.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { JSDOM } from 'jsdom';

const OUTPUT = join(__dirname, '..', '..', '..', 'workbench', 'labextension');
const FIXTURE = join(__dirname, '..', '..', 'test', 'fixtures', 'report.wbreport.json');
const MIME = 'application/vnd.workbench.report+json';

async function loadContainer(): Promise<{ window: any; container: any }> {
  const pkg = JSON.parse(readFileSync(join(OUTPUT, 'package.json'), 'utf8'));
  const dom = new JSDOM('<!doctype html><head></head><body></body>', {
    runScripts: 'dangerously',
    resources: 'usable',
    url: `file://${OUTPUT}/`
  });
  const window = dom.window as any;
  const script = window.document.createElement('script');
  script.src = `file://${join(OUTPUT, pkg.jupyterlab._build.load)}`;
  await new Promise((resolve, reject) => {
    script.onload = resolve;
    script.onerror = () => reject(new Error(`cannot load ${script.src}`));
    window.document.head.append(script);
  });
  const container = window._JUPYTERLAB[pkg.name];
  assert.ok(container, `${pkg.name} did not register a container`);
  class Widget {
    node = window.document.createElement('div');
    addClass(name: string) {
      this.node.classList.add(name);
    }
  }
  await container.init({
    '@lumino/widgets': { '2.11.0': { get: async () => () => ({ Widget }), loaded: 1, from: 'test' } }
  });
  return { window, container };
}

test('the built container exposes the MIME extension, which renders a report', async () => {
  const { container } = await loadContainer();
  const extension = (await container.get('./mimeExtension'))().default;
  assert.equal(extension.id, '@workbench/report-renderer:plugin');
  assert.deepEqual([...extension.rendererFactory.mimeTypes], [MIME]); // copy: the array is from jsdom's realm
  assert.equal(extension.dataType, 'json');
  assert.ok(extension.rank < 50, 'must outrank the text/html fallback');
  const renderer = extension.rendererFactory.createRenderer({ mimeType: MIME });
  const report = JSON.parse(readFileSync(FIXTURE, 'utf8'));
  await renderer.renderModel({ data: { [MIME]: report } });
  assert.equal(renderer.node.querySelectorAll('tbody tr').length, 5);
  assert.equal(renderer.node.querySelector('tbody td').textContent, 'matmul');
});

test('the built container injects the stylesheet', async () => {
  const { window, container } = await loadContainer();
  (await container.get('./style'))();
  const css = [...window.document.querySelectorAll('style')].map((s: any) => s.textContent).join('');
  assert.match(css, /\.wb-Report-bar/);
});

test('a malformed payload renders a message instead of throwing', async () => {
  const { container } = await loadContainer();
  const extension = (await container.get('./mimeExtension'))().default;
  const renderer = extension.rendererFactory.createRenderer({ mimeType: MIME });
  await renderer.renderModel({ data: { [MIME]: { calls: 'nope' } } });
  assert.match(renderer.node.textContent, /Cannot show this Workbench report: report: "calls" must be an array/);
});
