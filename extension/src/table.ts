/**
 * The report as an interactive table: click a header to sort, a box to filter, a switch to
 * aggregate calls, a bar behind each Percent, the device totals and the configuration below.
 * Plain DOM and textContent only: nothing from the report is ever parsed as HTML.
 */
import {
  aggregate,
  columnSums,
  DURATION,
  NAME,
  PERCENT,
  Report,
  START,
  tableColumns,
  without
} from './aggregate';
import { formatMetric, numericValue, Row } from './format';
import { filterRows, SortOrder, sortRows } from './sort';

/** More rows than this are cut (with a note): the DOM stays quick on long traces. */
export const MAX_ROWS = 2000;

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class ReportTable {
  readonly node: HTMLDivElement;
  private readonly report: Report;
  private readonly columns: string[];
  private readonly totals: Row[];
  private aggregated = true;
  private filter = '';
  private order: SortOrder = { column: DURATION, descending: true };
  private readonly table = element('table', 'wb-Report-table');
  private readonly summary = element('span', 'wb-Report-summary');

  constructor(report: Report) {
    this.report = report;
    this.totals = Object.values(report.deviceMetrics).map(metrics => ({
      ...without(metrics, [START]),
      [NAME]: { kind: 'string', value: 'Total' }
    }));
    this.columns = tableColumns([...report.calls, ...this.totals]);
    if (!this.columns.includes(DURATION)) {
      this.order = { column: this.columns[0] ?? NAME, descending: false };
    }
    this.node = element('div', 'wb-Report');
    this.node.append(this.toolbar(), this.scroller(), this.configuration());
    this.render();
  }

  /** The rows in view, in order: calls or groups, filtered and sorted. */
  visibleRows(): Row[] {
    const calls = this.report.calls.map(call => without(call, [START]));
    const rows = this.aggregated ? aggregate(calls) : calls;
    return sortRows(filterRows(rows, this.filter), this.order);
  }

  setAggregate(on: boolean): void {
    this.aggregated = on;
    this.render();
  }

  setFilter(query: string): void {
    this.filter = query;
    this.render();
  }

  /** Sort by `column`; the same column again flips the direction. Numbers start largest. */
  sortBy(column: string): void {
    if (this.order.column === column) {
      this.order = { column, descending: !this.order.descending };
    } else {
      const numeric = this.report.calls.some(c => numericValue(c[column]) !== undefined);
      this.order = { column, descending: numeric };
    }
    this.render();
  }

  private toolbar(): HTMLElement {
    const bar = element('div', 'wb-Report-toolbar');
    const filter = element('input', 'wb-Report-filter');
    filter.type = 'search';
    filter.placeholder = 'Filter by name, device, shapes…';
    filter.setAttribute('aria-label', 'Filter rows');
    filter.addEventListener('input', () => this.setFilter(filter.value));
    const toggle = element('label', 'wb-Report-aggregate');
    const box = element('input');
    box.type = 'checkbox';
    box.checked = this.aggregated;
    box.addEventListener('change', () => this.setAggregate(box.checked));
    toggle.append(box, ' Aggregate calls');
    toggle.title = 'One row per Name, Argument Shapes and Device, durations and counts summed';
    bar.append(filter, toggle, this.summary);
    return bar;
  }

  private scroller(): HTMLElement {
    const wrap = element('div', 'wb-Report-scroll');
    wrap.append(this.table);
    return wrap;
  }

  private configuration(): HTMLElement {
    const block = element('details', 'wb-Report-config');
    block.open = true;
    block.append(element('summary', undefined, 'Configuration'));
    const entries = Object.entries(this.report.configuration);
    if (entries.length === 0) {
      block.append(element('p', 'wb-Report-empty', 'No configuration recorded.'));
    }
    const list = element('dl');
    for (const [key, value] of entries) {
      list.append(element('dt', undefined, key), element('dd', undefined, formatMetric(value)));
    }
    block.append(list);
    return block;
  }

  private render(): void {
    const rows = this.visibleRows();
    const shown = rows.slice(0, MAX_ROWS);
    const head = element('thead');
    head.append(this.headerRow());
    const body = element('tbody');
    shown.forEach(row => body.append(this.dataRow(row)));
    if (rows.length === 0) {
      const note = this.report.calls.length ? 'No row matches the filter.' : 'No calls were profiled.';
      const cell = element('td', 'wb-Report-empty', note);
      cell.colSpan = Math.max(1, this.columns.length);
      const tr = element('tr');
      tr.append(cell);
      body.append(tr);
    }
    const foot = element('tfoot');
    foot.append(this.dataRow(columnSums(rows), 'wb-Report-sum'));
    this.totals.forEach(total => foot.append(this.dataRow(total, 'wb-Report-total')));
    this.table.replaceChildren(head, body, foot);
    const what = this.aggregated ? 'groups' : 'calls';
    const cut = rows.length > shown.length ? `, first ${shown.length} shown` : '';
    this.summary.textContent = `${rows.length} ${what} of ${this.report.calls.length} calls${cut}`;
  }

  private headerRow(): HTMLTableRowElement {
    const tr = element('tr');
    for (const column of this.columns) {
      const th = element('th');
      const button = element('button', 'wb-Report-sort', column);
      button.title = `Sort by ${column}`;
      button.addEventListener('click', () => this.sortBy(column));
      th.append(button);
      if (column === this.order.column) {
        th.setAttribute('aria-sort', this.order.descending ? 'descending' : 'ascending');
        th.classList.add('wb-Report-sorted');
      }
      tr.append(th);
    }
    return tr;
  }

  private dataRow(row: Row, className?: string): HTMLTableRowElement {
    const tr = element('tr', className);
    for (const column of this.columns) {
      const metric = row[column];
      const td = element('td');
      if (numericValue(metric) !== undefined) {
        td.classList.add('wb-Report-num');
      }
      if (column === PERCENT && metric !== undefined && metric.kind === 'percent') {
        const bar = element('span', 'wb-Report-bar');
        bar.style.width = `${Math.min(100, Math.max(0, metric.value))}%`;
        td.classList.add('wb-Report-percent');
        td.append(bar);
      }
      td.append(element('span', 'wb-Report-text', formatMetric(metric)));
      tr.append(td);
    }
    return tr;
  }
}
