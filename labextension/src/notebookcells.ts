/**
 * The cells of a live notebook model as asks see them: find a cell, read its record, apply
 * the record rule of cells.ts to the model, write a pin, delete an ask's cells.
 */
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';

import {
  asGeneratedRecord,
  generatedIds,
  generatedRecordJSON,
  ICellData,
  ICellSource,
  IGeneratedRecord,
  isAskSource,
  withPin
} from './cells';
import { METADATA_KEY } from './protocol';

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

/** Tell a code cell. */
export function isCode(cell: ICellModel | null): cell is ICodeCellModel {
  return cell !== null && cell.type === 'code';
}

/** The generated-cell record of a cell, if it has one. */
export function generatedRecord(cell: ICellModel): IGeneratedRecord | null {
  return asGeneratedRecord(cell.getMetadata(METADATA_KEY));
}

/** Write a generated cell's record into its metadata. */
export function writeGeneratedRecord(cell: ICellModel, record: IGeneratedRecord): void {
  cell.setMetadata(METADATA_KEY, generatedRecordJSON(record));
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
 * Write `--pin <pin>` into an ask cell's first line, unless it is there already.
 *
 * The pin is part of the answer, not an edit: a cell that ran as it stands is not marked
 * "edited since it ran" for it (JupyterLab compares the source with the one that ran).
 */
export function pinCell(cell: ICellModel | null, pin: string | null | undefined): void {
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
