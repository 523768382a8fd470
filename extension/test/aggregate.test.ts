import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import {
  aggregate,
  columnSums,
  combine,
  DURATION,
  groupKey,
  NAME,
  parseReport,
  START,
  tableColumns,
  without
} from '../src/aggregate';
import { formatMetric, Row } from '../src/format';
import { sortRows } from '../src/sort';

// Written by Python: a report.json() and the cells of report.table(aggregate=True/False).
const FIXTURES = join(__dirname, '..', '..', 'test', 'fixtures');
const payload = JSON.parse(readFileSync(join(FIXTURES, 'report.wbreport.json'), 'utf8'));
const expected = JSON.parse(readFileSync(join(FIXTURES, 'report.table.json'), 'utf8'));

/** The rows of the Python table, built from our functions: calls or groups by duration,
 *  a separator, the Sum row, then one Total per device. */
function pythonTable(rows: Row[], devices: Record<string, Row>): string[][] {
  const sorted = sortRows(rows.map(r => without(r, [START])), { column: DURATION, descending: true });
  const separator: Row = { [NAME]: { kind: 'string', value: '----------' } };
  const totals = Object.values(devices).map(
    (d): Row => ({ ...without(d, [START]), [NAME]: { kind: 'string', value: 'Total' } })
  );
  const all = [...sorted, separator, columnSums(sorted), ...totals];
  const columns = tableColumns(all);
  return [columns, ...all.map(row => columns.map(c => formatMetric(row[c])))];
}

test('aggregated table equals the Python table(aggregate=True), cell for cell', () => {
  const report = parseReport(payload);
  const [columns, ...rows] = pythonTable(aggregate(report.calls), report.deviceMetrics);
  assert.deepEqual(columns, expected.aggregated.columns);
  assert.deepEqual(rows, expected.aggregated.rows);
});

test('per-call table equals the Python table(aggregate=False), cell for cell', () => {
  const report = parseReport(payload);
  const [columns, ...rows] = pythonTable(report.calls, report.deviceMetrics);
  assert.deepEqual(columns, expected.calls.columns);
  assert.deepEqual(rows, expected.calls.rows);
});

test('configuration values print as in the Python block', () => {
  const report = parseReport(payload);
  const printed = Object.fromEntries(
    Object.entries(report.configuration).map(([k, v]) => [k, formatMetric(v)])
  );
  assert.deepEqual(printed, expected.configuration);
});

test('groups are keyed by Hash (else Name), shapes and device, without collisions', () => {
  const s = (value: string) => ({ kind: 'string', value }) as const;
  assert.notEqual(groupKey({ Name: s('ab'), Device: s('c') }), groupKey({ Name: s('a'), Device: s('bc') }));
  assert.equal(groupKey({ Name: s('x'), Hash: s('h1') }), groupKey({ Name: s('y'), Hash: s('h1') }));
});

test('combine sums durations and counts, averages ratios, keeps only common strings', () => {
  assert.deepEqual(combine([{ kind: 'count', value: 2 }, { kind: 'count', value: 3 }], 'Count'), { kind: 'count', value: 5 });
  assert.deepEqual(combine([{ kind: 'ratio', value: 1 }, { kind: 'ratio', value: 2 }], 'IPC'), { kind: 'ratio', value: 1.5 });
  assert.deepEqual(combine([{ kind: 'string', value: 'a' }, { kind: 'string', value: 'b' }], 'N'), { kind: 'string', value: '' });
  assert.throws(() => combine([{ kind: 'count', value: 1 }, { kind: 'ratio', value: 1 }], 'X'), /several kinds/);
});

test('parseReport accepts missing parts and names the place of bad data', () => {
  assert.deepEqual(parseReport({}), { calls: [], deviceMetrics: {}, configuration: {} });
  assert.throws(() => parseReport({ calls: {} }), /"calls" must be an array/);
  assert.throws(() => parseReport({ calls: [{ Count: { count: 'x' } }] }), /calls\[0\]\["Count"\]/);
  assert.throws(() => parseReport('text'), /expected a JSON object/);
});

test('aggregating an empty report gives no rows and a Sum of nothing', () => {
  assert.deepEqual(aggregate([]), []);
  assert.deepEqual(columnSums([]), { Name: { kind: 'string', value: 'Sum' } });
});
