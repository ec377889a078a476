/**
 * Keep the cells of asks untrusted: model-written output never runs script.
 *
 * JupyterLab renders a trusted cell's outputs live (HTML with its scripts and event
 * handlers, JavaScript, widgets) and trusts every cell it runs. The outputs of a generated
 * cell come from code the model wrote, steered perhaps by the data it read; an `%%ask`
 * cell's output area also receives whatever that code publishes while the ask runs. So these
 * cells are untrusted, like the outputs of a notebook you did not run yourself: HTML is
 * sanitized, JavaScript is not run, SVG is shown as an image (svg.ts). Running such a cell
 * again does not trust it; only the user does, with "Trust Notebook" (or the setting
 * `trustGeneratedOutputs`, documented with its risk).
 *
 * The same holds for every cell of a kernel where model-written code ran (outputtrust.ts),
 * until it restarts, whatever trust the notebook had (the setting still trusts them), and for
 * every cell of a sandboxed kernel, always (nothing trusts those).
 */
import type { CellModel, ICellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { IObservableList } from '@jupyterlab/observables';

import { askIdOf } from './cells';
import type { KernelState } from './outputtrust';
import { METADATA_KEY } from './protocol';

/** The one switch for the whole page: trust generated outputs (off unless the user opts in). */
export interface ITrustPolicy {
  trustGenerated: boolean;
}

/** Say whether a cell belongs to an ask: an `%%ask` cell with a record, or a generated one. */
export function isAskCell(cell: ICellModel): boolean {
  return askIdOf(cell.getMetadata(METADATA_KEY)) !== null;
}

/** Tell a cell whose run puts model-written code in its kernel: an ask's, or an agent's. */
export function runsModelCode(cell: ICellModel): boolean {
  const record = cell.getMetadata(METADATA_KEY) as { external?: unknown } | undefined;
  return (
    isAskCell(cell) ||
    typeof record?.external === 'string' ||
    (cell.type === 'code' && /^\s*%%?ask\b/m.test(cell.sharedModel.getSource()))
  );
}

/**
 * Withdraw a cell's trust and the `trusted` flag JupyterLab put in its metadata, which
 * the server reads when it signs the notebook on save.
 */
export function untrust(cell: ICellModel): void {
  cell.trusted = false;
  if (cell.getMetadata('trusted') !== undefined) {
    cell.deleteMetadata('trusted');
  }
}

/** Trust the user gives while this is true is theirs (the "Trust Notebook" command runs). */
let vouching = false;

/** Treat trust given while `done` is pending as the user's own (JupyterLab's trust dialog). */
export function vouchDuring(done: Promise<unknown>): void {
  vouching = true;
  const end = (): void => {
    vouching = false;
  };
  done.then(end, end);
}

/**
 * Watch one notebook's cells: an ask's cell that becomes trusted (JupyterLab trusts every
 * cell it runs or clears) is made untrusted again at once, before any output can arrive.
 *
 * Cells trusted when they first appear keep their trust: JupyterLab loads a notebook
 * trusted only when its signature is the user's own (they trusted it before).
 */
export class TrustGuard {
  constructor(
    private readonly _model: INotebookModel,
    private readonly _policy: ITrustPolicy,
    private readonly _kernel: () => KernelState = () => 'clean'
  ) {
    _model.cells.changed.connect(this._onCellsChanged, this);
    for (let i = 0; i < _model.cells.length; i++) {
      this._watch(_model.cells.get(i));
    }
  }

  /** Guard this cell from now on (an ask starts in it): it is untrusted now. */
  guard(cell: ICellModel): void {
    this._watch(cell);
    this._vouched.delete(cell);
    this._guarded.add(cell);
    if (!this._trustsGenerated()) {
      untrust(cell);
    }
  }

  /** Set the trust of a cell just inserted for a step: none, unless the policy trusts. */
  place(cell: ICellModel): void {
    this._watch(cell);
    if (this._trustsGenerated()) {
      cell.trusted = true;
    } else {
      untrust(cell);
    }
  }

  /**
   * A run of this cell is about to start: take its trust now where the run's must not stay.
   * A cell trusted already (by its notebook's signature, or "Trust Notebook") gets no new
   * trust from the run, so no signal would tell the guard; untrusted here, it gets one.
   */
  scheduled(cell: ICellModel): void {
    if (cell.trusted && this._kernel() !== 'clean' && !this._trustsGenerated()) {
      untrust(cell);
    }
  }

  dispose(): void {
    this._model.cells.changed.disconnect(this._onCellsChanged, this);
  }

  private _onCellsChanged(_: unknown, change: IObservableList.IChangedArgs<ICellModel>): void {
    for (const cell of change.newValues) {
      this._watch(cell);
    }
  }

  private _watch(cell: ICellModel): void {
    if (this._watched.has(cell)) {
      return;
    }
    this._watched.add(cell);
    if (cell.trusted && isAskCell(cell)) {
      this._vouched.add(cell);
    }
    // Both fire when JupyterLab trusts a cell (it writes `trusted` into the metadata first);
    // the record arriving on a cell its run trusted fires the second.
    (cell as CellModel).stateChanged.connect((_, change) => {
      if (change.name === 'trusted') {
        this._onTrusted(cell, true);
      }
    }, this);
    cell.metadataChanged.connect(() => this._onTrusted(cell, false), this);
  }

  /** A cell is trusted now: by a run or "Trust Notebook" (`given`), or its metadata changed. */
  private _onTrusted(cell: ICellModel, given: boolean): void {
    if (!cell.trusted) {
      return;
    } else if (given && this._kernel() === 'sandboxed') {
      untrust(cell); // nothing trusts a box's outputs, not even "Trust Notebook"
    } else if (vouching) {
      this._vouched.add(cell);
    } else if (this._applies(cell, given)) {
      untrust(cell);
    }
  }

  private _applies(cell: ICellModel, given: boolean): boolean {
    if (this._policy.trustGenerated) {
      return false;
    }
    // Model code ran in the kernel (or the server has not said yet): the trust a run gives
    // goes, whatever trust the notebook was loaded with. Outputs from before keep theirs.
    return (
      (given && this._kernel() !== 'clean') ||
      (!this._vouched.has(cell) && (this._guarded.has(cell) || isAskCell(cell)))
    );
  }

  /** Tell whether the cells of steps may be trusted: the setting, never in a box. */
  private _trustsGenerated(): boolean {
    return this._policy.trustGenerated && this._kernel() !== 'sandboxed';
  }

  private readonly _watched = new WeakSet<ICellModel>();
  /** Trusted by the user: by signature when the notebook was loaded, or "Trust Notebook". */
  private readonly _vouched = new WeakSet<ICellModel>();
  /** `%%ask` cells an ask started in before their record was written. */
  private readonly _guarded = new WeakSet<ICellModel>();
}
