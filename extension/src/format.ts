/**
 * Metric values of a Workbench profiling report, and how the table prints them.
 *
 * In the report JSON every metric is a one-key object whose key says its kind:
 * {"microseconds": 12.5}, {"percent": 40}, {"count": 3}, {"ratio": 0.5}, {"string": "cpu0"}.
 * Cells are printed as the Python text table does (workbench/runtime/profiling/metrics.py):
 * durations and percents with two decimals, counts as integers, ratios as C's "%.2g".
 * Rounding is to nearest with ties to even on the exact binary value, as Python and printf
 * do (JavaScript's toFixed rounds ties away from zero, so 0.125 would print as 0.13).
 */

export type Kind = 'string' | 'count' | 'microseconds' | 'percent' | 'ratio';

export type Metric =
  | { kind: 'string'; value: string }
  | { kind: 'count' | 'microseconds' | 'percent' | 'ratio'; value: number };

/** One table row: a call, an aggregated group of calls, a Sum or a device Total. */
export type Row = Record<string, Metric>;

const NUMERIC_KINDS: ReadonlySet<string> = new Set(['count', 'microseconds', 'percent', 'ratio']);

/** Decode one metric object; throws an Error naming `where` if it is not one. */
export function decodeMetric(raw: unknown, where: string): Metric {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error(`${where}: a metric must be an object like {"count": 1}`);
  }
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length !== 1) {
    throw new Error(`${where}: a metric must have exactly one key, got ${entries.length}`);
  }
  const [kind, value] = entries[0];
  if (kind === 'string' && typeof value === 'string') {
    return { kind, value };
  }
  if (NUMERIC_KINDS.has(kind) && typeof value === 'number' && Number.isFinite(value)) {
    return { kind: kind as Exclude<Kind, 'string'>, value };
  }
  throw new Error(`${where}: cannot read metric ${JSON.stringify(raw)}`);
}

/** The number inside a metric (undefined for strings and missing cells): what sorting uses. */
export function numericValue(metric: Metric | undefined): number | undefined {
  return metric && metric.kind !== 'string' ? metric.value : undefined;
}

/** A cell's text, as in the Python table; a missing metric is an empty cell. */
export function formatMetric(metric: Metric | undefined): string {
  if (metric === undefined) {
    return '';
  }
  switch (metric.kind) {
    case 'string':
      return metric.value;
    case 'count':
      return String(Math.trunc(metric.value));
    case 'microseconds':
    case 'percent':
      return formatFixed(metric.value, 2);
    case 'ratio':
      return formatGeneral(metric.value, 2);
  }
}

// ---- exact decimal rounding ---------------------------------------------------------------

/** The exact decimal value of a finite double |x|, as digits * 10^-scale. */
function exactDecimal(x: number): { digits: string; scale: number } {
  x = Math.abs(x);
  if (x >= 1e21) {
    return { digits: BigInt(x).toString(), scale: 0 }; // an integer; toFixed would go exponential
  }
  // 100 decimals hold every double >= 1e-50 exactly, and a tie needs far fewer.
  const [whole, fraction] = x.toFixed(100).split('.');
  const kept = fraction.replace(/0+$/, '');
  return { digits: (whole + kept).replace(/^0+(?=\d)/, ''), scale: kept.length };
}

/** Round digits * 10^-scale to `decimals` places (may be negative), ties to even.
 *  Returns the integer n such that the result is n * 10^-decimals. */
function roundDecimal(digits: string, scale: number, decimals: number): bigint {
  const drop = scale - decimals;
  if (drop <= 0) {
    return BigInt(digits + '0'.repeat(-drop));
  }
  const cut = digits.length - drop;
  const head = cut > 0 ? BigInt(digits.slice(0, cut)) : 0n;
  const tail = cut > 0 ? digits.slice(cut) : '0'.repeat(-cut) + digits;
  const above = tail[0] > '5' || (tail[0] === '5' && /[1-9]/.test(tail.slice(1)));
  const tie = tail[0] === '5' && !/[1-9]/.test(tail.slice(1));
  return above || (tie && head % 2n === 1n) ? head + 1n : head;
}

function withPoint(n: bigint, decimals: number): string {
  const s = n.toString().padStart(decimals + 1, '0');
  return decimals > 0 ? `${s.slice(0, -decimals)}.${s.slice(-decimals)}` : s;
}

/** printf("%.Nf"): `decimals` places after the point. */
export function formatFixed(x: number, decimals: number): string {
  const { digits, scale } = exactDecimal(x);
  const text = withPoint(roundDecimal(digits, scale, decimals), decimals);
  return (x < 0 || Object.is(x, -0) ? '-' : '') + text;
}

/** printf("%.Ng") as Python formats it: N significant digits, trailing zeros removed,
 *  scientific notation (two-digit exponent at least) below 1e-4 or from 10^N up. */
export function formatGeneral(x: number, precision: number): string {
  const sign = x < 0 || Object.is(x, -0) ? '-' : '';
  if (x === 0) {
    return sign + '0';
  }
  const { digits, scale } = exactDecimal(x);
  const significant = digits.replace(/^0+/, '');
  let exponent = significant.length - 1 - scale;
  let rounded = roundDecimal(digits, scale, precision - 1 - exponent);
  if (rounded.toString().length > precision) {
    exponent += 1; // 9.96 -> 10: the rounding carried into a new digit
    rounded /= 10n;
  }
  if (exponent >= -4 && exponent < precision) {
    return sign + stripZeros(formatFixed(Math.abs(x), precision - 1 - exponent));
  }
  const mantissa = stripZeros(withPoint(rounded, precision - 1));
  const power = Math.abs(exponent).toString().padStart(2, '0');
  return `${sign}${mantissa}e${exponent < 0 ? '-' : '+'}${power}`;
}

function stripZeros(s: string): string {
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}
