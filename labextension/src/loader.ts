/**
 * Keep an answered notebook runnable headless: a visible `%load_ext jupyter_ci` cell.
 *
 * JupyterLab loads the magics itself (frontend.ts), so a notebook made here needs no such
 * cell to run in Lab; nbconvert, papermill, nbclient and VS Code do not load them, and stop
 * at the first `%%ask` with "Cell magic `%%ask` not found". When an ask first succeeds in a
 * notebook where no code cell loads the extension before its first ask, one is inserted above
 * its first code cell: every ask is below it, and a reader sees what the notebook needs.
 */
import type { INotebookModel } from '@jupyterlab/notebook';

/** The source of the cell inserted (the line a user would write). */
export const LOAD_SOURCE = '%load_ext jupyter_ci';

const LOADS = /^\s*%(re)?load_ext\s+jupyter_ci\s*$/m;
const ASK = /^\s*%%?ask\b/;

/** A cell as the rule reads it. */
export interface ILoaderCell {
  cellType: string;
  source: string;
}

/** Tell whether a code cell's source loads the extension (`%load_ext` or `%reload_ext`). */
export function loadsExtension(source: string): boolean {
  return LOADS.test(source);
}

/**
 * Where the load cell goes (above the first code cell), or null when none is needed: no ask
 * in the notebook, or a code cell at or above the first ask already loads the extension.
 */
export function loadCellIndex(cells: readonly ILoaderCell[]): number | null {
  let firstCode = -1;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells[i];
    if (cell.cellType !== 'code') {
      continue;
    }
    if (firstCode < 0) {
      firstCode = i;
    }
    if (ASK.test(cell.source)) {
      return firstCode; // its prompt may mention the line: it is no code
    }
    if (loadsExtension(cell.source)) {
      return null;
    }
  }
  return null;
}

/**
 * Where an ask inserted at `index` goes: there, or just below the notebook's first cell that
 * loads the extension when `index` is at or above it (a title cell active), so no ask lands
 * above the line it needs.
 */
export function belowLoadCell(cells: readonly ILoaderCell[], index: number): number {
  const load = cells.findIndex(cell => cell.cellType === 'code' && loadsExtension(cell.source));
  return load >= 0 && index <= load ? load + 1 : index;
}

/** Read a notebook's cells as the rules above read them. */
export function loaderCells(model: INotebookModel): ILoaderCell[] {
  const cells: ILoaderCell[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    cells.push({ cellType: cell.type, source: cell.sharedModel.getSource() });
  }
  return cells;
}

/** Insert the load cell into a notebook that needs one (see loadCellIndex); else nothing. */
export function ensureLoadCell(model: INotebookModel): void {
  const index = loadCellIndex(loaderCells(model));
  if (index !== null) {
    model.sharedModel.insertCell(index, { cell_type: 'code', source: LOAD_SOURCE });
  }
}
