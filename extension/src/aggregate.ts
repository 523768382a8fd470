/**
 * Reading a report payload and the row operations of the Python table
 * (workbench/runtime/profiling/rows.py): group calls, combine metrics, the Sum row, columns.
 */
import { decodeMetric, Metric, Row } from './format';

export const NAME = 'Name';
export const DURATION = 'Duration (us)';
export const PERCENT = 'Percent';
export const DEVICE = 'Device';
export const COUNT = 'Count';
export const ARGUMENT_SHAPES = 'Argument Shapes';
export const HASH = 'Hash';
/** Per-call start time: timeline data, left out of the table like the Python table does. */
export const START = 'Start (us)';

/** The six columns the table always starts with, in the Python table's order. */
export const FIXED_COLUMNS = [NAME, DURATION, PERCENT, DEVICE, COUNT, ARGUMENT_SHAPES];

export interface Report {
  calls: Row[];
  deviceMetrics: Record<string, Row>;
  configuration: Row;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}

function decodeRow(raw: unknown, where: string): Row {
  if (!isObject(raw)) {
    throw new Error(`${where}: expected an object of metrics`);
  }
  const row: Row = {};
  for (const [name, value] of Object.entries(raw)) {
    row[name] = decodeMetric(value, `${where}["${name}"]`);
  }
  return row;
}

/** The report from its JSON object ({"calls", "device_metrics", "configuration"});
 *  missing parts are empty, anything else malformed throws an Error saying where. */
export function parseReport(data: unknown): Report {
  if (!isObject(data)) {
    throw new Error('report: expected a JSON object with "calls"');
  }
  const calls = data.calls ?? [];
  if (!Array.isArray(calls)) {
    throw new Error('report: "calls" must be an array');
  }
  const devices = data.device_metrics ?? {};
  if (!isObject(devices)) {
    throw new Error('report: "device_metrics" must be an object keyed by device');
  }
  const deviceMetrics: Record<string, Row> = {};
  for (const [device, metrics] of Object.entries(devices)) {
    deviceMetrics[device] = decodeRow(metrics, `device_metrics["${device}"]`);
  }
  return {
    calls: calls.map((call, i) => decodeRow(call, `calls[${i}]`)),
    deviceMetrics,
    configuration: decodeRow(data.configuration ?? {}, 'configuration')
  };
}

function text(metric: Metric | undefined): string {
  return metric === undefined ? '' : String(metric.value);
}

/** Calls with equal keys form one aggregated row: (Hash or Name, Argument Shapes, Device). */
export function groupKey(row: Row): string {
  const ident = row[HASH] ?? row[NAME];
  return JSON.stringify([text(ident), text(row[ARGUMENT_SHAPES]), text(row[DEVICE])]);
}

/** One metric over a group: sum durations, percents and counts; mean of ratios; a string
 *  shared by every member, else "". Values of mixed kinds throw. */
export function combine(values: Metric[], name: string): Metric {
  const kind = values[0].kind;
  if (values.some(v => v.kind !== kind)) {
    throw new Error(`metric "${name}" has values of several kinds; calls cannot be aggregated`);
  }
  if (kind === 'string') {
    const first = values[0].value;
    return { kind, value: values.every(v => v.value === first) ? first : '' };
  }
  const total = values.reduce((sum, v) => sum + (v.value as number), 0);
  return { kind, value: kind === 'ratio' ? total / values.length : total };
}

/** Every metric name in the rows, in order of first appearance. */
export function metricNames(rows: Row[]): string[] {
  const names = new Set<string>();
  for (const row of rows) {
    Object.keys(row).forEach(name => names.add(name));
  }
  return [...names];
}

/** One row per groupKey, groups in order of first appearance (as the Python table). */
export function aggregate(calls: Row[]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const call of calls) {
    const key = groupKey(call);
    const members = groups.get(key);
    members ? members.push(call) : groups.set(key, [call]);
  }
  const names = metricNames(calls);
  return [...groups.values()].map(members => {
    const row: Row = {};
    for (const name of names) {
      const values = members.filter(m => name in m).map(m => m[name]);
      if (values.length > 0) {
        row[name] = combine(values, name);
      }
    }
    return row;
  });
}

/** The Sum row: every duration, percent and count column summed; Name is "Sum". */
export function columnSums(rows: Row[]): Row {
  const columns = new Map<string, Metric[]>();
  for (const row of rows) {
    for (const [name, value] of Object.entries(row)) {
      if (value.kind === 'microseconds' || value.kind === 'percent' || value.kind === 'count') {
        columns.has(name) ? columns.get(name)!.push(value) : columns.set(name, [value]);
      }
    }
  }
  const sums: Row = {};
  columns.forEach((values, name) => (sums[name] = combine(values, name)));
  sums[NAME] = { kind: 'string', value: 'Sum' };
  return sums;
}

/** The row without the named metrics. */
export function without(row: Row, hidden: string[]): Row {
  return Object.fromEntries(Object.entries(row).filter(([name]) => !hidden.includes(name)));
}

/** The columns to show: the fixed six that occur in some row, then the others sorted. */
export function tableColumns(rows: Row[]): string[] {
  const present = new Set(metricNames(rows));
  const others = [...present].filter(n => !FIXED_COLUMNS.includes(n) && n !== START).sort();
  return [...FIXED_COLUMNS.filter(n => present.has(n)), ...others];
}
