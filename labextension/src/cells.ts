/**
 * Turn the kernel's ask messages into real cells of one notebook model.
 */
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { PartialJSONObject } from '@lumino/coreutils';

import type { TrustGuard } from './trust';
import {
  asGeneratedRecord,
  IAskAbove,
  IAttempt,
  IGeneratedRecord,
  IStepEnd,
  METADATA_KEY
} from './protocol';

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

function isCode(cell: ICellModel | null): cell is ICodeCellModel {
  return cell !== null && cell.type === 'code';
}

function generatedRecord(cell: ICellModel): IGeneratedRecord | null {
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

function toJSON(record: IGeneratedRecord): PartialJSONObject {
  const value: PartialJSONObject = {
    ask_id: record.ask_id,
    step: record.step,
    model: record.model,
    attempts: record.attempts as unknown as PartialJSONObject[]
  };
  if (record.interrupted) {
    value.interrupted = true;
  }
  return value;
}

/**
 * The cells of one running ask in one notebook.
 *
 * Cells are found by id on every message: the user may move, edit or delete
 * them while the ask runs, and a missing cell is skipped rather than recreated
 * somewhere surprising.
 */
export class AskCells {
  constructor(
    private readonly _model: INotebookModel,
    readonly askId: string,
    public askCellId: string,
    private readonly _modelName: string,
    private readonly _prompt: string = '',
    private readonly _trust: TrustGuard | null = null
  ) {}

  /**
   * Show code the model is still writing: in the step's cell when it is a fix, else in a
   * cell inserted where the step's cell goes, which the step then takes over.
   */
  preview(step: number, code: string): void {
    const existing = this._stepCell(step);
    if (existing !== null) {
      existing.sharedModel.setSource(code);
      return;
    }
    const placeholder = this._previewCell();
    if (placeholder !== null) {
      placeholder.sharedModel.setSource(code);
      return;
    }
    const index = this._insertionIndex();
    if (index < 0) {
      return;
    }
    this._model.sharedModel.insertCell(index, { cell_type: 'code', source: code });
    const cell = this._model.cells.get(index);
    this._previewId = cell.id;
    this.reveal?.(cell.id);
  }

  /** Insert the step's cell (attempt 1) or reset it for a new attempt. */
  startStep(step: number, attempt: number, code: string): void {
    this._codes.set(step, code);
    const placeholder = this._previewCell();
    this._previewId = null;
    if (placeholder !== null && attempt === 1 && this._stepCell(step) === null) {
      // The cell that showed the code as it was written becomes the step's cell.
      this._adopt(placeholder, step, code);
      return;
    }
    this._removeCell(placeholder);
    const existing = this._stepCell(step);
    if (attempt > 1 && existing !== null) {
      this._model.sharedModel.transact(() => {
        existing.sharedModel.setSource(code);
        existing.outputs.clear();
        existing.executionCount = null;
      });
      existing.executionState = 'running';
      return;
    }
    const index = this._insertionIndex();
    if (index < 0) {
      return;
    }
    const record: IGeneratedRecord = {
      ask_id: this.askId,
      step,
      model: this._modelName,
      attempts: []
    };
    this._model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: code,
      metadata: { [METADATA_KEY]: toJSON(record) }
    });
    const cell = this._model.cells.get(index);
    if (isCode(cell)) {
      // Model-written code's outputs: untrusted, so they never run script (trust.ts).
      this._trust?.place(cell);
      cell.executionState = 'running';
      this._stepIds.set(step, cell.id);
      this._lastId = cell.id;
      this.reveal?.(cell.id);
    }
  }

  /** Bring a new step's cell into view (asks sent from the panel, which the user follows). */
  reveal: ((cellId: string) => void) | null = null;

  /** Append one nbformat output to the step's cell. */
  output(step: number, output: nbformat.IOutput): void {
    this._stepCell(step)?.outputs.add(output);
  }

  /** Replace all of the step cell's outputs (a display was updated in place). */
  setOutputs(step: number, outputs: nbformat.IOutput[]): void {
    const cell = this._stepCell(step);
    if (cell !== null) {
      cell.outputs.fromJSON(outputs);
    }
  }

  /** Clear the step cell's outputs, now or (wait) on its next output. */
  clearOutput(step: number, wait: boolean): void {
    this._stepCell(step)?.outputs.clear(wait);
  }

  /** Record the attempt's result on the step's cell. */
  endStep(msg: IStepEnd): void {
    const cell = this._stepCell(msg.step);
    if (cell === null) {
      return;
    }
    const record = generatedRecord(cell) ?? {
      ask_id: this.askId,
      step: msg.step,
      model: this._modelName,
      attempts: []
    };
    const attempt: IAttempt = {
      attempt: msg.attempt,
      status: msg.status,
      ename: msg.error?.ename ?? null,
      evalue: msg.error?.evalue ?? null,
      duration_s: msg.duration_s,
      code: this._codes.get(msg.step) ?? cell.sharedModel.getSource()
    };
    record.attempts = [...record.attempts, attempt];
    cell.executionCount = msg.execution_count;
    cell.executionState = 'idle';
    cell.setMetadata(METADATA_KEY, toJSON(record));
  }

  /** Mark every cell of this ask as interrupted (they stay in the notebook). */
  markInterrupted(): void {
    for (let i = 0; i < this._model.cells.length; i++) {
      const cell = this._model.cells.get(i);
      const record = generatedRecord(cell);
      if (record !== null && record.ask_id === this.askId) {
        record.interrupted = true;
        cell.setMetadata(METADATA_KEY, toJSON(record));
      }
      if (isCode(cell) && this._isStepId(cell.id)) {
        cell.executionState = 'idle';
      }
    }
  }

  /**
   * Take over an ask that runs already (this page missed its start: reloaded, or a second
   * tab). The kernel shows the `%%ask` cell's log and answer in the output of the request
   * that started it, which this page never sees: the cell gets them here, as plain text,
   * and is put back (at the end) when the notebook does not have it.
   */
  resume(log: string[]): void {
    this._detached = true;
    let cell = findCell(this._model, this.askCellId);
    if (cell === null) {
      this._putBack(this._model.cells.length);
      cell = findCell(this._model, this.askCellId);
    }
    if (isCode(cell)) {
      cell.outputs.clear();
      const lines = log.map(line => `- ${line}`).join('\n');
      cell.outputs.add(plainText(`(Running in the kernel since before this page opened.)\n${lines}`));
    }
  }

  /**
   * Show the answer in a `%%ask` cell whose own output this page does not get (put back, or
   * taken over by resume), as plain text: nothing the kernel sends is rendered as HTML here.
   */
  showAnswer(answer: string): void {
    const cell = findCell(this._model, this.askCellId);
    if (!(this._reinserted || this._detached) || !isCode(cell) || !answer) {
      return;
    }
    const note = this._reinserted
      ? '(The notebook lost this %%ask cell while its ask ran, so it was put back here.)\n\n'
      : '';
    // The log shown since resume went stale: the answer replaces it.
    cell.outputs.clear();
    cell.outputs.add(plainText(note + answer));
  }

  /** Write the pin into the `%%ask` line (headless runners see only the source). */
  writePin(pin: string | undefined): void {
    pinCell(findCell(this._model, this.askCellId), pin);
  }

  /** Write the ask record into the `%%ask` cell's metadata (putting the cell back if gone). */
  writeRecord(record: Record<string, unknown> | null): void {
    if (findCell(this._model, this.askCellId) === null) {
      // Deleted after its steps were placed: back above them, so they stay its cells.
      const first = this._firstStepIndex();
      this._putBack(first < 0 ? this._model.cells.length : first);
    }
    const cell = findCell(this._model, this.askCellId);
    if (cell !== null && record !== null && typeof record === 'object') {
      cell.setMetadata(METADATA_KEY, record);
    }
  }

  /** Reset the running prompt of cells whose step never ended. */
  settle(): void {
    // Code the model was writing when the ask ended never ran: no cell for it.
    this._removeCell(this._previewCell());
    this._previewId = null;
    for (const step of this._stepIds.keys()) {
      const cell = this._stepCell(step);
      if (cell !== null && cell.executionState === 'running') {
        cell.executionState = 'idle';
      }
    }
  }

  private _previewCell(): ICodeCellModel | null {
    const cell = this._previewId === null ? null : findCell(this._model, this._previewId);
    return isCode(cell) ? cell : null;
  }

  private _removeCell(cell: ICellModel | null): void {
    if (cell !== null) {
      const index = cellIndex(this._model, cell.id);
      if (index >= 0) {
        this._model.sharedModel.deleteCell(index);
      }
    }
  }

  private _adopt(cell: ICodeCellModel, step: number, code: string): void {
    const record: IGeneratedRecord = { ask_id: this.askId, step, model: this._modelName, attempts: [] };
    this._model.sharedModel.transact(() => {
      cell.sharedModel.setSource(code);
      cell.setMetadata(METADATA_KEY, toJSON(record));
    });
    this._trust?.place(cell);
    cell.executionState = 'running';
    this._stepIds.set(step, cell.id);
    this._lastId = cell.id;
  }

  /** Insert the `%%ask` cell again at `index`, under a new id. */
  private _putBack(index: number): void {
    this._model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: `%%ask\n${this._prompt}`
    });
    // A new id: the record and pin of the ask's end go to this cell now.
    this.askCellId = this._model.cells.get(index).id;
    this._reinserted = true;
  }

  /** The index of the first cell placed for a step of this ask, or -1. */
  private _firstStepIndex(): number {
    let first = -1;
    for (const id of this._stepIds.values()) {
      const index = cellIndex(this._model, id);
      if (index >= 0 && (first < 0 || index < first)) {
        first = index;
      }
    }
    return first;
  }

  private _isStepId(cellId: string): boolean {
    for (const id of this._stepIds.values()) {
      if (id === cellId) {
        return true;
      }
    }
    return false;
  }

  private _stepCell(step: number): ICodeCellModel | null {
    const id = this._stepIds.get(step);
    if (id === undefined) {
      return null;
    }
    const cell = findCell(this._model, id);
    return isCode(cell) ? cell : null;
  }

  /** Below the last cell inserted for this ask, else below the `%%ask` cell. */
  private _insertionIndex(): number {
    if (this._lastId !== null) {
      const last = cellIndex(this._model, this._lastId);
      if (last >= 0) {
        return last + 1;
      }
    }
    let index = cellIndex(this._model, this.askCellId);
    if (index < 0) {
      // The %%ask cell was deleted while its ask runs: put it back at the end, so the
      // steps the kernel runs are still recorded as cells, never run unseen.
      index = this._model.cells.length;
      this._putBack(index);
      return index + 1;
    }
    // Skip cells of this ask already below the ask cell (e.g. when the last
    // inserted one was deleted by the user).
    while (index + 1 < this._model.cells.length) {
      const record = generatedRecord(this._model.cells.get(index + 1));
      if (record === null || record.ask_id !== this.askId) {
        break;
      }
      index++;
    }
    return index + 1;
  }

  private readonly _stepIds = new Map<number, string>();
  private readonly _codes = new Map<number, string>();
  private _lastId: string | null = null;
  private _reinserted = false;
  private _detached = false;
  /** The cell showing code the model is still writing, if any. */
  private _previewId: string | null = null;
}

function plainText(text: string): nbformat.IOutput {
  return { output_type: 'display_data', data: { 'text/plain': text }, metadata: {} };
}
