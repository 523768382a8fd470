/**
 * Ordering and filtering the rows the table shows.
 */
import { formatMetric, numericValue, Row } from './format';

export interface SortOrder {
  column: string;
  descending: boolean;
}

function compareCells(a: Row, b: Row, column: string): number {
  const x = numericValue(a[column]);
  const y = numericValue(b[column]);
  if (x !== undefined && y !== undefined) {
    return x - y;
  }
  // Strings (and numbers against strings) compare as text, digits by value: "conv2" < "conv10".
  return formatMetric(a[column]).localeCompare(formatMetric(b[column]), undefined, {
    numeric: true
  });
}

/** A sorted copy of `rows` (stable: equal cells keep their order). Rows without the column
 *  go last whichever the direction, so an ascending sort does not start with blanks. */
export function sortRows(rows: Row[], order: SortOrder): Row[] {
  const sign = order.descending ? -1 : 1;
  return [...rows].sort((a, b) => {
    const missingA = !(order.column in a);
    const missingB = !(order.column in b);
    if (missingA || missingB) {
      return Number(missingA) - Number(missingB);
    }
    return sign * compareCells(a, b, order.column);
  });
}

/** The rows with some text cell containing every word of `query` (case-insensitive);
 *  all rows for an empty query. Words may match different cells ("matmul cpu0"). */
export function filterRows(rows: Row[], query: string): Row[] {
  const words = query.toLowerCase().split(/\s+/).filter(w => w.length > 0);
  if (words.length === 0) {
    return rows;
  }
  return rows.filter(row => {
    const haystack = Object.values(row)
      .filter(m => m.kind === 'string')
      .map(m => String(m.value).toLowerCase())
      .join('\n');
    return words.every(w => haystack.includes(w));
  });
}
