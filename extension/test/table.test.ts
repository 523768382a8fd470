// The rendered table in a DOM without a browser (jsdom): headers sort, the box filters, the
// switch aggregates, bars follow Percent, and report text never becomes markup.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, test } from 'node:test';

import { JSDOM } from 'jsdom';

import { parseReport } from '../src/aggregate';
import { ReportTable } from '../src/table';

const payload = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'report.wbreport.json'), 'utf8')
);

beforeEach(() => {
  const { window } = new JSDOM('<!doctype html><body></body>');
  Object.assign(globalThis, { document: window.document, Event: window.Event });
});

const bodyCells = (view: ReportTable, column: number) =>
  [...view.node.querySelectorAll('tbody tr')].map(tr => tr.children[column]?.textContent);
const header = (view: ReportTable, name: string) =>
  [...view.node.querySelectorAll('thead th')].find(th => th.textContent === name)!;

test('starts aggregated, by duration, with Sum and device Totals in the footer', () => {
  const view = new ReportTable(parseReport(payload));
  assert.deepEqual(bodyCells(view, 0), ['matmul', 'relu', 'relu', 'reshape', 'matmul']);
  assert.deepEqual(bodyCells(view, 1), ['18.00', '2.50', '2.50', '1.00', '0.12']);
  assert.equal(header(view, 'Duration (us)').getAttribute('aria-sort'), 'descending');
  const footer = [...view.node.querySelectorAll('tfoot tr')].map(tr => tr.children[0].textContent);
  assert.deepEqual(footer, ['Sum', 'Total', 'Total']);
  assert.match(view.node.querySelector('.wb-Report-summary')!.textContent!, /^5 groups of 6 calls/);
});

test('clicking a header sorts by it, clicking again reverses', () => {
  const view = new ReportTable(parseReport(payload));
  const button = () => header(view, 'Name').querySelector('button')!;
  button().click();
  assert.deepEqual(bodyCells(view, 0), ['matmul', 'matmul', 'relu', 'relu', 'reshape']);
  assert.equal(header(view, 'Name').getAttribute('aria-sort'), 'ascending');
  button().click();
  assert.deepEqual(bodyCells(view, 0), ['reshape', 'relu', 'relu', 'matmul', 'matmul']);
});

test('the aggregate switch shows single calls', () => {
  const view = new ReportTable(parseReport(payload));
  const box = view.node.querySelector<HTMLInputElement>('.wb-Report-aggregate input')!;
  box.checked = false;
  box.dispatchEvent(new Event('change'));
  assert.equal(bodyCells(view, 0).length, 6);
  assert.deepEqual(bodyCells(view, 1), ['10.00', '8.00', '2.50', '2.50', '1.00', '0.12']);
});

test('the filter box keeps matching rows and the Sum follows them', () => {
  const view = new ReportTable(parseReport(payload));
  const input = view.node.querySelector<HTMLInputElement>('.wb-Report-filter')!;
  input.value = 'relu';
  input.dispatchEvent(new Event('input'));
  assert.deepEqual(bodyCells(view, 0), ['relu', 'relu']);
  assert.equal(view.node.querySelector('tfoot tr')!.children[1].textContent, '5.00');
  input.value = 'nothing-like-this';
  input.dispatchEvent(new Event('input'));
  assert.equal(view.node.querySelector('tbody')!.textContent, 'No row matches the filter.');
});

test('percent cells carry a bar as wide as the share', () => {
  const view = new ReportTable(parseReport(payload));
  const bar = view.node.querySelector<HTMLElement>('tbody .wb-Report-bar')!;
  assert.equal(bar.style.width, '45%');
});

test('configuration is listed, and report text is never parsed as HTML', () => {
  const report = parseReport({
    calls: [{ Name: { string: '<img src=x onerror=alert(1)>' }, 'Duration (us)': { microseconds: 1 } }],
    configuration: { Executor: { string: 'VM' }, 'Number of threads': { count: 2 } }
  });
  const view = new ReportTable(report);
  assert.equal(view.node.querySelector('img'), null);
  assert.equal(bodyCells(view, 0)[0], '<img src=x onerror=alert(1)>');
  const terms = [...view.node.querySelectorAll('.wb-Report-config dt')].map(e => e.textContent);
  assert.deepEqual(terms, ['Executor', 'Number of threads']);
});

test('an empty report says so', () => {
  const view = new ReportTable(parseReport({}));
  assert.equal(view.node.querySelector('tbody')!.textContent, 'No calls were profiled.');
});
