import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { Row } from '../src/format';
import { filterRows, sortRows } from '../src/sort';

const row = (name: string, us?: number, device = 'cpu0'): Row => ({
  Name: { kind: 'string', value: name },
  Device: { kind: 'string', value: device },
  ...(us === undefined ? {} : { 'Duration (us)': { kind: 'microseconds', value: us } as const })
});
const names = (rows: Row[]) => rows.map(r => r.Name.value);
const rows = [row('conv10', 9), row('conv2', 100), row('add', 9), row('relu'), row('Softmax', 0.5, 'cpu1')];

test('metric columns sort as numbers, not text', () => {
  const down = sortRows(rows, { column: 'Duration (us)', descending: true });
  assert.deepEqual(names(down), ['conv2', 'conv10', 'add', 'Softmax', 'relu']);
  const up = sortRows(rows, { column: 'Duration (us)', descending: false });
  assert.deepEqual(names(up), ['Softmax', 'conv10', 'add', 'conv2', 'relu']);
});

test('equal cells keep their order and rows without the column go last', () => {
  const up = sortRows(rows, { column: 'Duration (us)', descending: false });
  assert.deepEqual(names(up).slice(1, 3), ['conv10', 'add']);
  assert.equal(names(up).at(-1), 'relu');
});

test('text columns sort naturally and case-insensitively', () => {
  const up = sortRows(rows, { column: 'Name', descending: false });
  assert.deepEqual(names(up), ['add', 'conv2', 'conv10', 'relu', 'Softmax']);
  assert.deepEqual(names(sortRows(rows, { column: 'Name', descending: true })),
    ['Softmax', 'relu', 'conv10', 'conv2', 'add']);
});

test('sorting leaves its input alone', () => {
  const before = names(rows);
  sortRows(rows, { column: 'Name', descending: true });
  assert.deepEqual(names(rows), before);
});

test('filter matches every word in any text cell, ignoring case', () => {
  assert.deepEqual(names(filterRows(rows, 'CONV')), ['conv10', 'conv2']);
  assert.deepEqual(names(filterRows(rows, 'softmax cpu1')), ['Softmax']);
  assert.deepEqual(names(filterRows(rows, 'softmax cpu0')), []);
  assert.equal(filterRows(rows, '  ').length, rows.length);
  assert.deepEqual(names(filterRows(rows, '9')), [], 'numbers are not searched');
});
