/**
 * Cells an agent wrote or ran through the server's notebook door, as they come into a shared
 * notebook (docs/protocol.md section 5): untrusted, their kernel marked, badged.
 *
 * With real-time collaboration the server writes an agent's cells into the notebook's shared
 * document, marked in their metadata: `jupyter_ci.external` (the agent wrote the cell) and
 * `jupyter_ci.ran_by` (it ran the cell, maybe one of the user's). The server marks the kernel
 * as having run model-written code before it runs one, but this page asks the server about a
 * kernel only when it connects or restarts (outputtrust.ts). So when such a mark comes into,
 * or changes in, a cell this page holds, the page untrusts the cell and marks its kernel:
 * none of that kernel's outputs runs script from then on, the user's own next cells' included.
 *
 * The same holds for outputs another page's run (or the server's) writes into a cell this page
 * trusts while the kernel is not clean: JupyterLab trusts a cell on the page that runs it, and
 * this page's copy of the cell keeps the trust it had. Both are decided before the change
 * reaches the cell's outputs (Yjs's `beforeObserverCalls`), so no output renders trusted first.
 */
import type { ICellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { IObservableList } from '@jupyterlab/observables';
import type { IDisposable } from '@lumino/disposable';

import type { KernelMarks } from './outputtrust';
import { METADATA_KEY } from './protocol';
import type { TrustGuard } from './trust';

/** Who wrote a cell from outside the notebook, and who ran it (null: no one). */
export interface IAgentMark {
  external: string | null;
  ranBy: string | null;
}

/** Read the agent's marks of a cell's `jupyter_ci` metadata. */
export function agentMarkOf(value: unknown): IAgentMark {
  const record = (typeof value === 'object' && value !== null ? value : {}) as {
    external?: unknown;
    ran_by?: unknown;
  };
  return {
    external: typeof record.external === 'string' ? record.external : null,
    ranBy: typeof record.ran_by === 'string' ? record.ran_by : null
  };
}

/** Tell a cell an agent wrote or ran. */
export function isAgentCell(cell: ICellModel): boolean {
  const mark = agentMarkOf(cell.getMetadata(METADATA_KEY));
  return mark.external !== null || mark.ranBy !== null;
}

/** A Yjs type, as far as it is read here: the item that holds it in its parent. */
interface IYType {
  readonly _item: { readonly parent: unknown } | null;
}

/** A Yjs transaction, as far as it is read here: the types it changed. */
interface ITransaction {
  readonly local: boolean;
  readonly changed: Map<unknown, unknown>;
}

/**
 * Return the types a transaction changed and all that hold them. (Yjs gathers these itself as
 * it calls the observers, after `beforeObserverCalls`.)
 */
function changedWithParents(transaction: ITransaction): Set<unknown> {
  const found = new Set<unknown>();
  for (const changed of transaction.changed.keys()) {
    let type: unknown = changed;
    while (type !== null && type !== undefined && !found.has(type)) {
      found.add(type);
      type = (type as IYType)._item?.parent ?? null;
    }
  }
  return found;
}

/** A shared document's Yjs events, as far as they are used here. */
interface IYDocEvents {
  on(name: 'beforeObserverCalls' | 'afterTransaction', f: (t: ITransaction) => void): void;
  off(name: 'beforeObserverCalls' | 'afterTransaction', f: (t: ITransaction) => void): void;
}

/** A cell's shared map (@jupyter/ydoc's `ymodel`). */
interface ISharedCell {
  readonly ymodel?: { get(key: string): unknown };
}

/** What the page holds of one notebook, for its agents' cells. */
export interface IAgentCellsOptions {
  model: INotebookModel;
  guard: TrustGuard;
  marks: KernelMarks;
  /** The notebook's kernel now (null: none). */
  kernelId: () => string | null;
  /** Resolves once the notebook loaded: cells already there are not news. */
  loaded: Promise<unknown>;
}

/** Follow the changes other pages and the server make to one shared notebook model. */
export class AgentCells implements IDisposable {
  constructor(private readonly _options: IAgentCellsOptions) {
    this._ydoc = (_options.model.sharedModel as unknown as { ydoc: IYDocEvents }).ydoc;
    this._ydoc.on('beforeObserverCalls', this._before);
    this._ydoc.on('afterTransaction', this._after);
    _options.model.cells.changed.connect(this._onCellsChanged, this);
    void _options.loaded.then(() => {
      this._loaded = true;
    });
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._ydoc.off('beforeObserverCalls', this._before);
    this._ydoc.off('afterTransaction', this._after);
    this._options.model.cells.changed.disconnect(this._onCellsChanged, this);
  }

  /** A change from elsewhere, before any cell sees it: take the trust it must not meet. */
  private readonly _before = (transaction: ITransaction): void => {
    if (transaction.local || !this._loaded) {
      return;
    }
    this._remote = true;
    const changed = changedWithParents(transaction);
    const cells = this._options.model.cells;
    for (let i = 0; i < cells.length; i++) {
      const cell = cells.get(i);
      const ymodel = (cell.sharedModel as unknown as ISharedCell).ymodel;
      if (ymodel !== undefined && changed.has(ymodel)) {
        const outputs = ymodel.get('outputs');
        this._changed(cell, outputs !== undefined && changed.has(outputs));
      }
    }
  };

  private readonly _after = (): void => {
    this._remote = false;
  };

  /** Cells another page or the server inserted (their models are made in the change). */
  private _onCellsChanged(_: unknown, change: IObservableList.IChangedArgs<ICellModel>): void {
    if (this._remote && change.type === 'add') {
      for (const cell of change.newValues) {
        this._changed(cell, true);
      }
    }
  }

  private _changed(cell: ICellModel, outputs: boolean): void {
    const { guard, marks, kernelId } = this._options;
    if (isAgentCell(cell)) {
      guard.place(cell); // the agent's code: untrusted as a generated cell's
      const kernel = kernelId();
      if (kernel !== null) {
        marks.mark(kernel); // and it ran, or runs, in the kernel
      }
    } else if (outputs) {
      guard.scheduled(cell); // a run elsewhere: its outputs are as this page's own run's
    }
  }

  private readonly _ydoc: IYDocEvents;
  private _loaded = false;
  private _remote = false;
  private _isDisposed = false;
}
