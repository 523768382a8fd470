import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { decodeMetric, formatFixed, formatGeneral, formatMetric } from '../src/format';

// [x, Python f"{x:.2f}", Python f"{x:.2g}"] as printed by CPython 3.11.
const PYTHON: Array<[number, string, string]> = [
  [0.0, '0.00', '0'],
  [-0.0, '-0.00', '-0'],
  [0.125, '0.12', '0.12'],
  [0.375, '0.38', '0.38'],
  [0.625, '0.62', '0.62'],
  [0.875, '0.88', '0.88'],
  [2.5, '2.50', '2.5'],
  [-0.125, '-0.12', '-0.12'],
  [1.005, '1.00', '1'],
  [12.345, '12.35', '12'],
  [0.0049999, '0.00', '0.005'],
  [1234.5678, '1234.57', '1.2e+03'],
  [1e-7, '0.00', '1e-07'],
  [123456.0, '123456.00', '1.2e+05'],
  [0.000123, '0.00', '0.00012'],
  [0.0999, '0.10', '0.1'],
  [9.96, '9.96', '10'],
  [99.5, '99.50', '1e+02'],
  [1e22, '10000000000000000000000.00', '1e+22'],
  [2.675, '2.67', '2.7'],
  [0.5, '0.50', '0.5'],
  [1.5, '1.50', '1.5'],
  [-3.14159, '-3.14', '-3.1'],
  [1e-5, '0.00', '1e-05'],
  [0.0001, '0.00', '0.0001'],
  [12.0, '12.00', '12'],
  [45.0, '45.00', '45'],
  [1e16, '10000000000000000.00', '1e+16']
];

test('two-decimal cells match Python, ties to even', () => {
  for (const [x, fixed] of PYTHON) {
    assert.equal(formatFixed(x, 2), fixed, `formatFixed(${x}, 2)`);
  }
});

test('ratio cells match Python %.2g', () => {
  for (const [x, , general] of PYTHON) {
    assert.equal(formatGeneral(x, 2), general, `formatGeneral(${x}, 2)`);
  }
});

test('formatMetric prints each kind like the Python table', () => {
  assert.equal(formatMetric({ kind: 'microseconds', value: 12.5 }), '12.50');
  assert.equal(formatMetric({ kind: 'percent', value: 100 }), '100.00');
  assert.equal(formatMetric({ kind: 'count', value: 42 }), '42');
  assert.equal(formatMetric({ kind: 'ratio', value: 1 / 3 }), '0.33');
  assert.equal(formatMetric({ kind: 'string', value: 'cpu0' }), 'cpu0');
  assert.equal(formatMetric(undefined), '');
});

test('decodeMetric reads every tag and names the place of a bad one', () => {
  assert.deepEqual(decodeMetric({ microseconds: 1.5 }, 'x'), { kind: 'microseconds', value: 1.5 });
  assert.deepEqual(decodeMetric({ string: 'a' }, 'x'), { kind: 'string', value: 'a' });
  assert.deepEqual(decodeMetric({ count: 3 }, 'x'), { kind: 'count', value: 3 });
  assert.throws(() => decodeMetric({ count: 'three' }, 'calls[0]["Count"]'), /calls\[0\]\["Count"\]/);
  assert.throws(() => decodeMetric({ count: 1, ratio: 2 }, 'x'), /exactly one key/);
  assert.throws(() => decodeMetric([1], 'x'), /must be an object/);
  assert.throws(() => decodeMetric({ bytes: 1 }, 'x'), /cannot read metric/);
});
