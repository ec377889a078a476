/**
 * The notebook's code cells sent with an ask (`jupyter_ci_frontend.cells`): the kernel lists
 * them for the model, which may propose a new source for one of them (`edit_cell`), e.g. to
 * fix the error a cell shows. `%%ask` cells are left out; the list and each source are bounded.
 */
import type { ICellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import type { INotebookModel } from '@jupyterlab/notebook';

import { isAskSource } from './cells';
import { isCode } from './notebookcells';
import type { IWireSentCell } from './protocol.generated';

/** The most cells sent with an ask (those nearest the `%%ask` cell). */
export const MAX_SENT_CELLS = 100;

/** The longest source sent; a longer one is cut, with cutMarker saying so. */
export const MAX_CELL_CHARS = 20_000;

/** What ends a cut source. */
export function cutMarker(dropped: number): string {
  return `\n# … (cut by jupyter-ci: ${dropped} more characters)`;
}

/** The prompt of the ask that fixes the error of the cell `cellId` ("Fix", fixcell.ts). */
export function fixPrompt(cellId: string): string {
  return `Fix the error in the cell above (cell ${cellId}).`;
}

/** One cell as sent: its id, source and, when its outputs hold an error, "ename: evalue". */
export type ISentCell = IWireSentCell;

/** A cell as plain data: what the list is made of. */
export interface ICellRead {
  id: string;
  cellType: string;
  source: string;
  /** "ename: evalue" of its error output, or null. */
  error: string | null;
}

/** "ename: evalue" of the last error among nbformat outputs, or null. */
export function errorOfOutputs(outputs: readonly nbformat.IOutput[]): string | null {
  let found: string | null = null;
  for (const output of outputs) {
    if (output.output_type === 'error') {
      const error = output as nbformat.IError;
      found = `${String(error.ename)}: ${String(error.evalue)}`;
    }
  }
  return found;
}

/** A source cut to MAX_CELL_CHARS, with the marker when cut. */
export function boundedSource(source: string): string {
  if (source.length <= MAX_CELL_CHARS) {
    return source;
  }
  return source.slice(0, MAX_CELL_CHARS) + cutMarker(source.length - MAX_CELL_CHARS);
}

/**
 * The cells sent with the ask at index `askIndex`: every code cell but `%%ask` cells, in
 * notebook order, at most MAX_SENT_CELLS (the nearest to the ask when there are more).
 */
export function sentCells(cells: readonly ICellRead[], askIndex: number): ISentCell[] {
  const eligible: { index: number; cell: ICellRead }[] = [];
  cells.forEach((cell, index) => {
    if (cell.cellType === 'code' && !isAskSource(cell.source)) {
      eligible.push({ index, cell });
    }
  });
  const kept =
    eligible.length <= MAX_SENT_CELLS
      ? eligible
      : [...eligible]
          .sort((a, b) => Math.abs(a.index - askIndex) - Math.abs(b.index - askIndex))
          .slice(0, MAX_SENT_CELLS)
          .sort((a, b) => a.index - b.index);
  return kept.map(({ cell }) => {
    const sent: ISentCell = { id: cell.id, source: boundedSource(cell.source) };
    if (cell.error !== null) {
      sent.error = cell.error;
    }
    return sent;
  });
}

/** "ename: evalue" of a live cell's error output, or null (not a code cell, no error). */
export function cellError(cell: ICellModel): string | null {
  if (!isCode(cell)) {
    return null;
  }
  const errors: nbformat.IOutput[] = [];
  for (let i = 0; i < cell.outputs.length; i++) {
    const output = cell.outputs.get(i);
    if (output.type === 'error') {
      errors.push(output.toJSON());
    }
  }
  return errorOfOutputs(errors);
}

/** The cells of a live notebook, read for sentCells. */
export function readCells(model: INotebookModel): ICellRead[] {
  const cells: ICellRead[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    const source = cell.sharedModel.getSource();
    cells.push({ id: cell.id, cellType: cell.type, source, error: cellError(cell) });
  }
  return cells;
}
