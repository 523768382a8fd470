/**
 * JupyterLab MIME renderer for Workbench profiling reports.
 *
 * Python's `Report._repr_mimebundle_` emits MIME_TYPE with the parsed `report.json()` object;
 * files named `*.wbreport.json` (a saved `report.json()`) open in the same view.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { parseReport } from './aggregate';
import { ReportTable } from './table';

/** Must equal workbench.runtime.profiling.REPORT_MIME_TYPE (a Python test checks it). */
export const MIME_TYPE = 'application/vnd.workbench.report+json';

const FILE_TYPE = 'workbench-report';

export class ReportWidget extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('wb-ReportRenderer');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    try {
      const report = parseReport(model.data[this.mimeType]);
      this.node.replaceChildren(new ReportTable(report).node);
    } catch (err) {
      const message = document.createElement('pre');
      message.className = 'wb-Report-error';
      message.textContent = `Cannot show this Workbench report: ${(err as Error).message}`;
      this.node.replaceChildren(message);
    }
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true, // builds DOM with textContent only
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new ReportWidget(options)
};

const extension: IRenderMime.IExtension = {
  id: '@workbench/report-renderer:plugin',
  description: 'Renders Workbench profiling reports as a sortable table.',
  rendererFactory,
  rank: 0, // preferred over the text/html fallback in the same bundle (html ranks 50)
  dataType: 'json',
  fileTypes: [
    {
      name: FILE_TYPE,
      displayName: 'Workbench report',
      mimeTypes: [MIME_TYPE],
      extensions: ['.wbreport.json'],
      fileFormat: 'text'
    }
  ],
  documentWidgetFactoryOptions: {
    name: 'Workbench Report',
    primaryFileType: FILE_TYPE,
    fileTypes: [FILE_TYPE],
    defaultFor: [FILE_TYPE]
  }
};

export default extension;
