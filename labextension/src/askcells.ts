/**
 * The live step cells of a running ask: turn the kernel's ask messages into real cells of
 * one notebook model (what their records hold is cells.ts's rule).
 */
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { PartialJSONObject } from '@lumino/coreutils';

import { attemptOf, generatedRecordJSON, IGeneratedRecord, newGeneratedRecord } from './cells';
import {
  cellIndex,
  findCell,
  generatedRecord,
  isCode,
  pinCell,
  writeGeneratedRecord
} from './notebookcells';
import { IStepEnd, METADATA_KEY, ProgressMessage } from './protocol';
import type { IWireAskRecord } from './protocol.generated';
import type { TrustGuard } from './trust';

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

  /** Apply a message about the ask under way to its cells (the others change none). */
  apply(msg: ProgressMessage): void {
    switch (msg.type) {
      case 'code_preview':
        this.preview(msg.step, msg.code);
        break;
      case 'step_start':
        this.startStep(msg.step, msg.attempt, msg.code);
        break;
      case 'output':
        this.output(msg.step, msg.output);
        break;
      case 'clear_output':
        this.clearOutput(msg.step, msg.wait);
        break;
      case 'set_outputs':
        this.setOutputs(msg.step, msg.outputs);
        break;
      case 'step_end':
        this.endStep(msg);
        break;
    }
  }

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

  /**
   * Show a step that waits for the user's approval in the cell it will run in (as code the
   * model wrote, see preview); return that cell's id, or null when there is none.
   */
  showPending(step: number, code: string): string | null {
    this.preview(step, code);
    return this._stepCell(step)?.id ?? this._previewCell()?.id ?? null;
  }

  /** A pending step was skipped: its new cell goes; a fix's cell gets its last run code back. */
  dropPending(step: number): void {
    const existing = this._stepCell(step);
    const ran = this._codes.get(step);
    if (existing !== null && ran !== undefined) {
      existing.sharedModel.setSource(ran);
      return;
    }
    this._removeCell(this._previewCell());
    this._previewId = null;
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
    const record = newGeneratedRecord(this.askId, step, this._modelName);
    this._model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: code,
      metadata: { [METADATA_KEY]: generatedRecordJSON(record) }
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
    const record: IGeneratedRecord =
      generatedRecord(cell) ?? newGeneratedRecord(this.askId, msg.step, this._modelName);
    const code = this._codes.get(msg.step) ?? cell.sharedModel.getSource();
    record.attempts = [...record.attempts, attemptOf(msg, code)];
    cell.executionCount = msg.execution_count;
    cell.executionState = 'idle';
    writeGeneratedRecord(cell, record);
  }

  /** Mark every cell of this ask as interrupted (they stay in the notebook). */
  markInterrupted(): void {
    for (let i = 0; i < this._model.cells.length; i++) {
      const cell = this._model.cells.get(i);
      const record = generatedRecord(cell);
      if (record !== null && record.ask_id === this.askId) {
        record.interrupted = true;
        writeGeneratedRecord(cell, record);
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
  resume(log: string[], note = '(Running in the kernel since before this page opened.)'): void {
    this._detached = true;
    let cell = findCell(this._model, this.askCellId);
    if (cell === null) {
      this._putBack(this._model.cells.length);
      cell = findCell(this._model, this.askCellId);
    }
    if (isCode(cell)) {
      cell.outputs.clear();
      const lines = log.map(line => `- ${line}`).join('\n');
      cell.outputs.add(plainText(`${note}\n${lines}`));
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
  writePin(pin: string | null | undefined): void {
    pinCell(findCell(this._model, this.askCellId), pin);
  }

  /** Write the ask record into the `%%ask` cell's metadata (putting the cell back if gone). */
  writeRecord(record: IWireAskRecord | null): void {
    if (findCell(this._model, this.askCellId) === null) {
      // Deleted after its steps were placed: back above them, so they stay its cells.
      const first = this._firstStepIndex();
      this._putBack(first < 0 ? this._model.cells.length : first);
    }
    const cell = findCell(this._model, this.askCellId);
    if (cell !== null && record !== null && typeof record === 'object') {
      cell.setMetadata(METADATA_KEY, record as unknown as PartialJSONObject); // plain JSON
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
    const ask = findCell(this._model, this.askCellId);
    if ((this._detached || this._reinserted) && isCode(ask)) {
      // No reply of its request reaches this page: the `%%ask` cell would show [*] for good.
      ask.executionState = 'idle';
      if (this.askCount !== null && ask.executionCount === null) {
        ask.executionCount = this.askCount;
      }
    }
  }

  /** The `%%ask` cell's own execution count (its ask's start says it), if known. */
  askCount: number | null = null;

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
    const record = newGeneratedRecord(this.askId, step, this._modelName);
    this._model.sharedModel.transact(() => {
      cell.sharedModel.setSource(code);
      writeGeneratedRecord(cell, record);
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
