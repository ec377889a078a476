/**
 * "Fix": ask jupyter-ci to fix the error a code cell shows. The command (in the cell toolbar
 * and the panel) inserts an `%%ask` cell below that cell, asking to fix it by its id, and
 * runs it; the ask gets the notebook's cells (notebookcontext.ts), so the model may propose
 * a new source for that cell (`edit_cell`), which the user reviews.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { Cell, ICellModel } from '@jupyterlab/cells';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { LabIcon } from '@jupyterlab/ui-components';
import type { IDisposable } from '@lumino/disposable';

import { isAskSource } from './cells';
import { CommandIDs, IAskInserted } from './commands';
import { isCode } from './notebookcells';
import { cellError, fixPrompt } from './notebookcontext';

/**
 * The active cell of a notebook when it is a code cell whose outputs hold an error (not an
 * `%%ask` cell: its error is the ask's, which asking again handles).
 */
export function erroredCell(panel: NotebookPanel | null): Cell | null {
  const cell = panel?.content.activeCell ?? null;
  if (cell === null || isAskSource(cell.model.sharedModel.getSource())) {
    return null;
  }
  return cellError(cell.model) !== null ? cell : null;
}

export interface IFixDeps {
  tracker: INotebookTracker;
  /** Insert and run an ask in the notebook (the panel records it: pendingasks.ts). */
  ask: (panel: NotebookPanel, prompt: string, model: string | null) => IAskInserted | null;
  /** The model the panel picked (null: the server's default). */
  model: () => string | null;
  /** The command's icon (the panel's). */
  icon?: LabIcon;
}

/** Ask to fix the active cell's error, below it; return the inserted `%%ask` cell. */
export function fixActiveCell(panel: NotebookPanel, deps: IFixDeps): IAskInserted | null {
  const cell = erroredCell(panel);
  if (cell === null) {
    return null;
  }
  // The ask goes below the active cell (below the whole ask when it is an ask's cell).
  return deps.ask(panel, fixPrompt(cell.model.id), deps.model());
}

/** Register the Fix command, shown when the active cell has an error. */
export function addFixCommand(app: JupyterFrontEnd, deps: IFixDeps): IDisposable {
  const { tracker } = deps;
  const hasError = (): boolean => erroredCell(tracker.currentWidget) !== null;
  const command = app.commands.addCommand(CommandIDs.fixCell, {
    label: 'Fix',
    caption: 'Ask jupyter-ci to fix the error of this cell (in a new %%ask cell below it)',
    icon: deps.icon,
    isEnabled: hasError,
    isVisible: hasError,
    execute: () => {
      const panel = tracker.currentWidget;
      const inserted = panel === null ? null : fixActiveCell(panel, deps);
      return inserted === null ? null : { cellId: inserted.cellId };
    }
  });
  const watcher = new ActiveCellErrors(tracker, () =>
    app.commands.notifyCommandChanged(CommandIDs.fixCell)
  );
  return {
    get isDisposed() {
      return watcher.isDisposed;
    },
    dispose: () => {
      watcher.dispose();
      command.dispose();
    }
  };
}

/** Calls `changed` when the active cell, or its outputs, change (its error may have). */
export class ActiveCellErrors implements IDisposable {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _changed: () => void
  ) {
    _tracker.activeCellChanged.connect(this._onActiveCell, this);
    _tracker.currentChanged.connect(this._onActiveCell, this);
    this._onActiveCell();
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (!this._isDisposed) {
      this._isDisposed = true;
      this._tracker.activeCellChanged.disconnect(this._onActiveCell, this);
      this._tracker.currentChanged.disconnect(this._onActiveCell, this);
      this._watch(null);
    }
  }

  private _onActiveCell(): void {
    this._watch(this._tracker.activeCell?.model ?? null);
    this._changed();
  }

  private _watch(model: ICellModel | null): void {
    const old = this._model;
    if (isCode(old) && !old.isDisposed) {
      old.outputs.changed.disconnect(this._changed);
    }
    this._model = model;
    if (isCode(model) && !model.isDisposed) {
      model.outputs.changed.connect(this._changed);
    }
  }

  private _model: ICellModel | null = null;
  private _isDisposed = false;
}
