/**
 * The buttons of a waiting approval inside its cell, in one notebook view: Run, Edit, Skip,
 * Stop under a step's code; the proposed plan (editable text) with Approve and Stop in the
 * `%%ask` cell. Everything the kernel sent is shown as text, never as HTML.
 *
 * Every button has a `data-jupyter-ci` attribute for browser tests.
 */
import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';
import { PanelLayout, Widget } from '@lumino/widgets';

import { approvalText } from './approval';
import type { IPendingApproval, NotebookApprovals } from './approvalcontrol';

export const BAR_CLASS = 'jp-ci-approval';

/** A button with a label, a test name and what it does. */
function button(label: string, name: string, onClick: () => void, accept = false): HTMLElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.className = `jp-Button jp-mod-styled ${accept ? 'jp-mod-accept' : 'jp-mod-reject'}`;
  node.textContent = label;
  node.dataset.jupyterCi = name;
  node.style.marginRight = '6px';
  node.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return node;
}

/** The bar of one waiting question (rebuilt when its state changes). */
class ApprovalBar extends Widget {
  /** Whether it was built for a step being edited. */
  readonly editing: boolean;

  constructor(
    readonly pending: IPendingApproval,
    approvals: NotebookApprovals
  ) {
    super();
    this.editing = pending.editing;
    this.addClass(BAR_CLASS);
    const node = this.node;
    node.dataset.jupyterCi = 'approval';
    node.dataset.jupyterCiKind = pending.kind;
    node.style.cssText =
      'padding: 6px 8px; margin: 4px 0 4px 64px; border-left: 3px solid var(--jp-warn-color1);' +
      'background: var(--jp-layout-color2); font-size: var(--jp-ui-font-size1);';
    const text = document.createElement('div');
    text.textContent = approvalText(pending);
    text.style.marginBottom = '6px';
    node.appendChild(text);
    if (pending.kind === 'plan') {
      node.appendChild(planBox(pending, approvals));
    }
    node.appendChild(buttons(pending, approvals));
  }
}

/** The plan as editable text (a textarea: never rendered). */
function planBox(pending: IPendingApproval, approvals: NotebookApprovals): HTMLElement {
  const box = document.createElement('textarea');
  box.value = pending.draft;
  box.dataset.jupyterCi = 'plan';
  box.rows = Math.min(16, Math.max(3, pending.draft.split('\n').length + 1));
  box.style.cssText =
    'width: 100%; box-sizing: border-box; font-family: var(--jp-code-font-family);';
  box.addEventListener('input', () => approvals.setDraft(pending.askId, box.value));
  // Keys typed here are the plan's, not notebook shortcuts.
  box.addEventListener('keydown', event => event.stopPropagation());
  return box;
}

function buttons(pending: IPendingApproval, approvals: NotebookApprovals): HTMLElement {
  const row = document.createElement('div');
  const { askId } = pending;
  if (pending.kind === 'plan') {
    row.appendChild(button('Approve', 'approve-plan', () => approvals.answer(askId, 'run'), true));
  } else {
    const run = pending.editing ? 'Run edited code' : 'Run';
    row.appendChild(button(run, 'approve-run', () => approvals.answer(askId, 'run'), true));
    if (!pending.editing) {
      row.appendChild(button('Edit', 'approve-edit', () => approvals.edit(askId)));
    }
    row.appendChild(button('Skip', 'approve-skip', () => approvals.answer(askId, 'skip')));
  }
  row.appendChild(button('Stop', 'approve-stop', () => approvals.answer(askId, 'stop')));
  return row;
}

/** The bars of one notebook view, kept in step with its approvals and its cells. */
export class ApprovalBars implements IDisposable {
  constructor(
    private readonly _notebook: Notebook,
    private readonly _approvals: NotebookApprovals
  ) {
    _approvals.changed.connect(this._schedule, this);
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
    this._approvals.changed.disconnect(this._schedule, this);
    this._notebook.modelChanged.disconnect(this._onModelChanged, this);
    for (const bar of this._bars.values()) {
      bar.dispose();
    }
    this._bars.clear();
  }

  private _onModelChanged(): void {
    this._notebook.model?.cells.changed.connect(this._schedule, this);
    this._schedule();
  }

  /** Sync once the notebook has made the widgets of new cells. */
  private _schedule(): void {
    if (!this._scheduled) {
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
    const seen = new Set<Cell>();
    for (const cell of this._notebook.widgets) {
      seen.add(cell);
      this._syncCell(cell);
    }
    for (const [cell, bar] of this._bars) {
      if (!seen.has(cell) || cell.isDisposed) {
        bar.dispose();
        this._bars.delete(cell);
      }
    }
  }

  /** Give a cell the bar of the question it shows (a new one when the state changed). */
  private _syncCell(cell: Cell): void {
    const pending = this._approvals.forCell(cell.model.id);
    const bar = this._bars.get(cell);
    const current = bar !== undefined && !bar.isDisposed && bar.pending === pending;
    if (current && bar.editing === pending?.editing) {
      return;
    }
    bar?.dispose();
    this._bars.delete(cell);
    if (pending === null) {
      return;
    }
    const layout = cell.layout as PanelLayout;
    const input = layout.widgets.findIndex(w => w.hasClass('jp-Cell-inputWrapper'));
    if (input < 0) {
      if (!this._waiting.has(cell)) {
        this._waiting.add(cell); // not rendered yet (a windowed notebook): once it is
        void cell.ready.then(() => this._schedule());
      }
      return;
    }
    const added = new ApprovalBar(pending, this._approvals);
    layout.insertWidget(input + 1, added);
    this._bars.set(cell, added);
  }

  private readonly _bars = new Map<Cell, ApprovalBar>();
  private readonly _waiting = new WeakSet<Cell>();
  private _scheduled = false;
  private _isDisposed = false;
}
