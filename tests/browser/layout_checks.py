"""Geometry checks run in the page (Playwright ``evaluate``): what a reader would see wrong.

Each check is a JavaScript function of one output element that returns a list of problems
(empty: fine), each a sentence naming the element, so an assertion message says what to fix.
Elements in a hidden tab (zero-size boxes) are skipped.
"""
from __future__ import annotations

#: The notebook widgets' tables (``.wb-table-scroll`` containers, :mod:`workbench.widgets.
#: table_html`): rows at most two lines tall; a clipped cell carries its full text in a
#: ``title``; a table wider than its container scrolls (``overflow-x`` auto or scroll) and the
#: container stays inside the output; the text of neighbouring cells does not touch.
TABLE_PROBLEMS = r"""
(root) => {
  const problems = [];
  const edge = root.getBoundingClientRect().right;
  for (const box of root.querySelectorAll('.wb-table-scroll')) {
    const b = box.getBoundingClientRect();
    if (b.width === 0 || b.height === 0) continue;
    const table = box.querySelector('table');
    const where = (table.className || 'table') + ' (' + table.rows.length + ' rows)';
    if (b.right > edge + 1)
      problems.push(`${where}: its container runs ${Math.round(b.right - edge)}px past the output`);
    const overflowX = getComputedStyle(box).overflowX;
    if (table.getBoundingClientRect().width > box.clientWidth + 1 &&
        overflowX !== 'auto' && overflowX !== 'scroll')
      problems.push(`${where}: wider than its container, which does not scroll`);
    for (const tr of table.querySelectorAll('tbody tr')) {
      const cell = tr.cells[0];
      const style = getComputedStyle(cell);
      const line = parseFloat(style.lineHeight) || 1.25 * parseFloat(style.fontSize);
      const height = tr.getBoundingClientRect().height;
      if (height > 2 * line + 8)
        problems.push(`${where}: row ${tr.rowIndex} is ${Math.round(height)}px tall ` +
                      `(a line is ${Math.round(line)}px): ${tr.textContent.slice(0, 60)}`);
    }
    for (const tr of table.rows) {
      let previous = null;
      for (const cell of tr.cells) {
        const text = cell.textContent;
        if (cell.scrollWidth > cell.clientWidth + 1) {
          const title = cell.getAttribute('title') || '';
          if (title.length < text.length)
            problems.push(`${where}: cell "${text.slice(0, 40)}" is cut without its full ` +
                          `text in a title`);
        }
        // the visible extent of the text (a clipped text ends at the cell's padding)
        const range = document.createRange();
        range.selectNodeContents(cell);
        const r = range.getBoundingClientRect();
        const c = cell.getBoundingClientRect();
        const pad = parseFloat(getComputedStyle(cell).paddingRight);
        const visible = {left: Math.max(r.left, c.left), right: Math.min(r.right, c.right - pad)};
        if (text.trim() && previous && visible.left - previous.right < 4)
          problems.push(`${where}: "${previous.text.slice(0, 30)}" and "${text.slice(0, 30)}" ` +
                        `run into each other (${Math.round(visible.left - previous.right)}px)`);
        if (text.trim()) previous = {right: visible.right, text};
      }
    }
  }
  return problems;
}
"""

#: Plotly figures and the widgets around them: no two of the given elements overlap, none
#: runs past the output's right edge, and in every plot the legend stays off the plotting
#: area and off the axis titles.
OVERLAP_PROBLEMS = r"""
(root) => {
  const problems = [];
  const edge = root.getBoundingClientRect().right;
  const boxes = [];
  const visible = (r) => r.width > 0 && r.height > 0;
  const overlap = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                            Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const named = (el, name) => { const r = el.getBoundingClientRect();
                                if (visible(r)) boxes.push({name, r}); };
  root.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const title = (plot.querySelector('.gtitle') || {}).textContent || `plot ${i}`;
    named(plot.querySelector('.main-svg') || plot, `plot "${title}"`);
    const area = plot.querySelector('.nsewdrag');
    const legend = plot.querySelector('.legend');
    if (area && legend && visible(legend.getBoundingClientRect())) {
      const a = area.getBoundingClientRect(), l = legend.getBoundingClientRect();
      if (overlap(a, l) > 0)
        problems.push(`plot "${title}": the legend covers the plotting area`);
      for (const t of plot.querySelectorAll('.g-xtitle, .g-ytitle')) {
        if (overlap(t.getBoundingClientRect(), l) > 0)
          problems.push(`plot "${title}": the legend covers the axis title "${t.textContent}"`);
      }
    }
  });
  root.querySelectorAll('.wb-table-scroll, .widget-html-content, .widget-button, ' +
                        '.widget-toggle-buttons, .widget-progress').forEach((el) => {
    if (!el.closest('.js-plotly-plot') && !el.querySelector('.wb-table-scroll'))
      named(el, el.className.split(' ')[0] + ' "' + el.textContent.trim().slice(0, 30) + '"');
  });
  for (const {name, r} of boxes) {
    if (r.right > edge + 1)
      problems.push(`${name} runs ${Math.round(r.right - edge)}px past the output's edge`);
  }
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const area = overlap(a.r, b.r);
      if (area > 4)   // a shared border pixel is no overlap
        problems.push(`${a.name} and ${b.name} overlap (${Math.round(area)} px^2)`);
    }
  }
  return problems;
}
"""
