/**
 * The cells of a notebook as asks see them: which cells an ask generated (the one rule),
 * the pin in an `%%ask` line, and the code above an ask the kernel checks. The live cells
 * of a running ask are askcells.ts.
 */
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';

import { asGeneratedRecord, IAskAbove, IGeneratedRecord, METADATA_KEY } from './protocol';

/** Return the index of the cell with this id, or -1. */
export function cellIndex(model: INotebookModel, cellId: string): number {
  const cells = model.cells;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i).id === cellId) {
      return i;
    }
  }
  return -1;
}

/** Return the cell with this id, or null. */
export function findCell(model: INotebookModel, cellId: string): ICellModel | null {
  const index = cellIndex(model, cellId);
  return index < 0 ? null : model.cells.get(index);
}

export function isCode(cell: ICellModel | null): cell is ICodeCellModel {
  return cell !== null && cell.type === 'code';
}

export function generatedRecord(cell: ICellModel): IGeneratedRecord | null {
  return asGeneratedRecord(cell.getMetadata(METADATA_KEY));
}

/** A cell as plain data (an nbformat cell, or a cell model read out): what the rule reads. */
export interface ICellData {
  id: string;
  metadata?: { readonly [key: string]: unknown };
}

/** Return a cell's `metadata.jupyter_ci` when it is an object with a non-empty `ask_id`. */
function recordOf(cell: ICellData | undefined): { [key: string]: unknown } | null {
  const value = cell?.metadata?.[METADATA_KEY];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const record = value as { [key: string]: unknown };
  return typeof record.ask_id === 'string' && record.ask_id !== '' ? record : null;
}

/**
 * Ids of the generated cells of the ask cell at `index`, in order (the one rule).
 *
 * An ask cell's record has an `ask_id` and no `step`; a generated cell's has
 * an `ask_id` and an integer `step`. Its generated cells are the later cells
 * generated for the same ask; other cells in between, and pasted copies of the
 * ask cell, are ignored. Their steps must read 1, 2, ..., k, else there are
 * none. A generated cell has none. docs/protocol.md section 4;
 * `jupyter_ci.kernel.record.generated_after` is the kernel's side.
 */
export function generatedIds(cells: readonly ICellData[], index: number): string[] {
  const ask = recordOf(cells[index]);
  if (ask === null || 'step' in ask) {
    return [];
  }
  const ids: string[] = [];
  for (let i = index + 1; i < cells.length; i++) {
    const record = recordOf(cells[i]);
    if (record === null || record.ask_id !== ask.ask_id || !Number.isInteger(record.step)) {
      continue;
    }
    if (record.step !== ids.length + 1) {
      return [];
    }
    ids.push(cells[i].id);
  }
  return ids;
}

/**
 * Ids of the generated cells of the `%%ask` cell `cellId` ([] if not found).
 *
 * This is `jupyter_ci_frontend.generated` of docs/protocol.md section 1.
 */
export function generatedAfter(model: INotebookModel, cellId: string): string[] {
  const cells: ICellData[] = [];
  let index = -1;
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.id === cellId) {
      index = i;
    }
    cells.push({ id: cell.id, metadata: { [METADATA_KEY]: cell.getMetadata(METADATA_KEY) } });
  }
  return generatedIds(cells, index);
}

/**
 * Put `--pin <pin>` right after `%%ask` (or `%ask`) in the first line of an ask cell's
 * source, replacing an older pin; other sources are returned unchanged.
 */
export function withPin(source: string, pin: string): string {
  const newline = source.indexOf('\n');
  const first = newline < 0 ? source : source.slice(0, newline);
  const rest = newline < 0 ? '' : source.slice(newline);
  const found = /^(\s*%%?ask)\b(.*)$/.exec(first);
  if (found === null || !/^[0-9a-f]+$/.test(pin)) {
    return source;
  }
  const options = found[2].replace(/\s--pin(=|\s+)\S+/g, '');
  return `${found[1]} --pin ${pin}${options}${rest}`;
}

/**
 * Write `--pin <pin>` into an ask cell's first line, unless it is there already.
 *
 * The pin is part of the answer, not an edit: a cell that ran as it stands is not marked
 * "edited since it ran" for it (JupyterLab compares the source with the one that ran).
 */
export function pinCell(cell: ICellModel | null, pin: string | undefined): void {
  if (cell !== null && typeof pin === 'string') {
    const source = cell.sharedModel.getSource();
    const pinned = withPin(source, pin);
    if (pinned !== source) {
      const clean = isCode(cell) && !cell.isDirty;
      cell.sharedModel.setSource(pinned);
      if (clean) {
        // CodeCellModel's public setter (ICodeCellModel declares the property read-only):
        // false takes the pinned source as the one that ran.
        (cell as { isDirty: boolean }).isDirty = false;
      }
    }
  }
}

/** The most source text sent with an ask for the kernel's restart check. */
export const MAX_ABOVE_CHARS = 200_000;

/** Tell an `%%ask` or `%ask` cell by its source. */
export function isAskSource(source: string): boolean {
  return /^\s*%%?ask\b/.test(source);
}

/**
 * The sources of the code cells above index `index` (ask cells left out: their code is in
 * their generated cells), for the kernel to tell which names a restart would lose; null
 * when they are more than MAX_ABOVE_CHARS, too many to send with a request.
 */
export function codeAbove(
  cells: ReadonlyArray<{ cellType: string; source: string }>,
  index: number
): string[] | null {
  const sources: string[] = [];
  let total = 0;
  for (const cell of cells.slice(0, Math.max(0, index))) {
    if (cell.cellType !== 'code' || isAskSource(cell.source)) {
      continue;
    }
    total += cell.source.length;
    if (total > MAX_ABOVE_CHARS) {
      return null;
    }
    sources.push(cell.source);
  }
  return sources;
}

/** A cell as plain data, with its type and source. */
export interface ICellSource extends ICellData {
  cellType: string;
  source: string;
}

/**
 * The ask cells above index `index`, each with the ask its record names and where its
 * generated cells are in codeAbove's list: the kernel replaces those with the steps it ran
 * for that ask after this request was sent (Run All sends every request at once).
 */
export function asksAbove(cells: readonly ICellSource[], index: number): IAskAbove[] {
  const before = cells.slice(0, Math.max(0, index));
  const position = new Map<string, number>();
  for (const cell of before) {
    if (cell.cellType === 'code' && !isAskSource(cell.source)) {
      position.set(cell.id, position.size);
    }
  }
  const asks: IAskAbove[] = [];
  before.forEach((cell, i) => {
    if (cell.cellType !== 'code' || !isAskSource(cell.source)) {
      return;
    }
    const record = recordOf(cell);
    const places = generatedIds(before, i).map(id => position.get(id) ?? -1);
    asks.push({
      cell_id: cell.id,
      ask_id: record !== null && !('step' in record) ? (record.ask_id as string) : null,
      cells: places.filter(place => place >= 0)
    });
  });
  return asks;
}

/** The cells above the ask cell `cellId` of a notebook; undefined when it is not one. */
export function cellsAboveAsk(model: INotebookModel, cellId: string): ICellSource[] | undefined {
  const cells: ICellSource[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    const source = cell.sharedModel.getSource();
    if (cell.id === cellId) {
      return isAskSource(source) ? cells : undefined;
    }
    const metadata = { [METADATA_KEY]: cell.getMetadata(METADATA_KEY) };
    cells.push({ id: cell.id, metadata, cellType: cell.type, source });
  }
  return undefined;
}

/** Delete the generated cells of an ask (a re-ask replaces them); keep `keepId`. */
export function deleteAskCells(model: INotebookModel, askId: string, keepId: string): void {
  const doomed: number[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    const record = generatedRecord(cell);
    if (cell.id !== keepId && record !== null && record.ask_id === askId) {
      doomed.push(i);
    }
  }
  if (doomed.length === 0) {
    return;
  }
  model.sharedModel.transact(() => {
    for (const index of doomed.reverse()) {
      model.sharedModel.deleteCell(index);
    }
  });
}
