/**
 * The one cell widget of questions: in one notebook view, each cell that shows a question
 * gets a box below its input, whatever the kind: a waiting step in the cell it will run in,
 * a plan and the state of an edit review in the `%%ask` cell, a proposed edit's diff in the
 * cell it targets. The kinds differ only in their bodies (questionbody.ts, reviewbox.ts).
 */
import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';
import { PanelLayout, Widget } from '@lumino/widgets';

import { fillApproval } from './questionbody';
import type { NotebookQuestions } from './questions';
import { renderEdits, renderReviewBar } from './reviewbox';

/** One part of a cell's box: its name, when to fill it again, how. */
interface IPart {
  name: string;
  /** Filled again only when this changes; undefined: each time the cell is synced. */
  key: unknown;
  fill(host: HTMLElement): void;
}

/** The box of one cell: a host per part shown, in the order given. */
class QuestionBox extends Widget {
  constructor() {
    super();
    this.addClass('jp-ci-question');
  }

  /** Show these parts (and no others), each filled again when its key changed. */
  showParts(parts: IPart[]): void {
    for (const [name, shown] of this._hosts) {
      if (!parts.some(part => part.name === name)) {
        shown.host.remove();
        this._hosts.delete(name);
      }
    }
    for (const part of parts) {
      let shown = this._hosts.get(part.name);
      if (shown === undefined) {
        shown = { host: document.createElement('div'), key: undefined, filled: false };
        this._hosts.set(part.name, shown);
      }
      if (!shown.filled || part.key === undefined || part.key !== shown.key) {
        part.fill(shown.host);
        shown.key = part.key;
        shown.filled = true;
      }
      this.node.appendChild(shown.host); // in order (a node already in place moves)
    }
  }

  private readonly _hosts = new Map<string, { host: HTMLElement; key: unknown; filled: boolean }>();
}

/** A host of an edit review's part, as the review's style wants it. */
function reviewHost(host: HTMLElement, name: string): HTMLElement {
  host.className = 'jp-ci-review';
  host.dataset.jupyterCi = name;
  return host;
}

/** The question boxes of one notebook view, kept in step with its questions and its cells. */
export class QuestionCells implements IDisposable {
  constructor(
    private readonly _notebook: Notebook,
    private readonly _questions: NotebookQuestions
  ) {
    _questions.changed.connect(this._schedule, this);
    _notebook.modelChanged.connect(this._onModelChanged, this);
    this._onModelChanged();
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._questions.changed.disconnect(this._schedule, this);
    this._notebook.modelChanged.disconnect(this._onModelChanged, this);
    for (const box of this._boxes.values()) {
      box.dispose();
    }
    this._boxes.clear();
  }

  private _onModelChanged(): void {
    const model = this._notebook.model;
    // A moved cell gets a new widget; an edited source may make an edit stale.
    model?.cells.changed.connect(this._schedule, this);
    model?.contentChanged.connect(this._schedule, this);
    this._schedule();
  }

  /** Sync once the notebook has made the widgets of new cells. */
  private _schedule(): void {
    if (!this._scheduled && !this._isDisposed) {
      this._scheduled = true;
      requestAnimationFrame(() => {
        this._scheduled = false;
        this._sync();
      });
    }
  }

  private _sync(): void {
    if (this._isDisposed || this._notebook.isDisposed) {
      return;
    }
    if (!this._questions.any && this._boxes.size === 0) {
      return; // nothing to show, nothing to take away: typing stays cheap
    }
    const seen = new Set<Cell>();
    for (const cell of this._notebook.widgets) {
      seen.add(cell);
      this._syncCell(cell, this._partsOf(cell));
    }
    for (const [cell, box] of this._boxes) {
      if (!seen.has(cell) || cell.isDisposed) {
        box.dispose();
        this._boxes.delete(cell);
      }
    }
  }

  /** What a cell shows: its waiting approval, the edits of it, the review its ask waits on. */
  private _partsOf(cell: Cell): IPart[] {
    const questions = this._questions;
    const id = cell.model.id;
    const parts: IPart[] = [];
    const pending = questions.forCell(id);
    if (pending !== null) {
      const fill = (h: HTMLElement) => fillApproval(h, pending, questions);
      parts.push({ name: 'approval', key: pending, fill });
    }
    const edits = questions.edits.shownIn(id, cell.model.sharedModel.getSource());
    if (edits.length > 0) {
      const fill = (h: HTMLElement) =>
        renderEdits(reviewHost(h, 'edit-review'), edits, questions.edits);
      parts.push({ name: 'edit-review', key: undefined, fill });
    }
    const open = questions.edits.openIn(id);
    if (open !== null) {
      const fill = (h: HTMLElement) =>
        renderReviewBar(reviewHost(h, 'review-area'), open.askId, open.review, questions.edits);
      parts.push({ name: 'review-area', key: undefined, fill });
    }
    return parts;
  }

  /** Give a cell the box of what it shows (none when it shows nothing). */
  private _syncCell(cell: Cell, parts: IPart[]): void {
    let box = this._boxes.get(cell);
    if (parts.length === 0 || box?.isDisposed) {
      box?.dispose();
      this._boxes.delete(cell);
      box = undefined;
      if (parts.length === 0) {
        return;
      }
    }
    if (box === undefined) {
      const layout = cell.layout;
      const input = layout instanceof PanelLayout
        ? layout.widgets.findIndex(w => w.hasClass('jp-Cell-inputWrapper'))
        : -1;
      if (input < 0) {
        this._later(cell); // not rendered yet (a windowed notebook): once it is
        return;
      }
      box = new QuestionBox();
      (layout as PanelLayout).insertWidget(input + 1, box);
      this._boxes.set(cell, box);
    }
    box.showParts(parts);
  }

  /** Sync again once this cell is ready (once per cell). */
  private _later(cell: Cell): void {
    if (!this._waiting.has(cell)) {
      this._waiting.add(cell);
      void cell.ready.then(() => this._schedule());
    }
  }

  private readonly _boxes = new Map<Cell, QuestionBox>();
  private readonly _waiting = new WeakSet<Cell>();
  private _scheduled = false;
  private _isDisposed = false;
}
