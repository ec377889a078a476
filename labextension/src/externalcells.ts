/**
 * Code an MCP client runs in this notebook's kernel (`run_in_notebook`), shown as a new cell
 * before it runs (docs/protocol.md section 5).
 *
 * The kernel opens a `jupyter_ci` comm with `{type: "external_cell", id, source, path, code}`;
 * the page of that notebook appends a cell with the code, marked in its metadata, and answers
 * `{type: "external_ack", id}`: without that answer the kernel never runs the code. The run's
 * outputs are the IOPub messages of the request that runs it, which this page sees as it
 * sees every request on its kernel; the kernel names that request by sending
 * `{type: "external_run"}` on the comm from inside it.
 */
import type { ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';

import { cellIndex, findCell, isCode } from './notebookcells';
import { METADATA_KEY } from './protocol';
import type { IWireExternalAck, IWireExternalCell } from './protocol.generated';
import type { TrustGuard } from './trust';

/** The first message of an external cell's comm (wire.comm.ExternalCell). */
export type IExternalCell = IWireExternalCell;

/** Return the message if `data` announces an external cell, else null. */
export function parseExternal(data: unknown): IExternalCell | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const record = data as Record<string, unknown>;
  const ok =
    record.type === 'external_cell' &&
    typeof record.id === 'string' &&
    typeof record.source === 'string' &&
    typeof record.code === 'string';
  if (!ok) {
    return null;
  }
  const path = typeof record.path === 'string' ? record.path : null;
  return { ...(record as unknown as IExternalCell), path };
}

/** Tell whether two notebook paths name the same file (leading slashes aside). */
export function samePath(a: string | null, b: string): boolean {
  return a === null || a.replace(/^\/+/, '') === b.replace(/^\/+/, '');
}

/** Turn an output message of IOPub into an nbformat output (null: not an output). */
export function outputOf(msg: KM.IIOPubMessage): nbformat.IOutput | null {
  const type = msg.header.msg_type;
  if (!['stream', 'display_data', 'execute_result', 'error'].includes(type)) {
    return null;
  }
  const content = { ...(msg.content as Record<string, unknown>) };
  delete content.transient;
  return { output_type: type, ...content } as nbformat.IOutput;
}

/**
 * One external cell: appended at the end of the notebook, acknowledged, then filled from
 * the IOPub messages of the request the kernel names.
 */
export class ExternalCell {
  constructor(
    private readonly _model: INotebookModel,
    private readonly _kernel: Kernel.IKernelConnection,
    private readonly _comm: Kernel.IComm,
    msg: IExternalCell,
    trust: TrustGuard | null
  ) {
    const index = _model.cells.length;
    _model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source: msg.code,
      metadata: { [METADATA_KEY]: { external: msg.source } }
    });
    const cell = _model.cells.get(index);
    this._cellId = cell.id;
    // Code from outside the notebook: its outputs run no script, as a generated cell's.
    trust?.place(cell);
    _kernel.iopubMessage.connect(this._onIOPub, this);
    _comm.onClose = () => this._onClose();
    _comm.send({ type: 'external_ack', id: msg.id } satisfies IWireExternalAck);
  }

  /** The cell's id in the notebook model. */
  get cellId(): string {
    return this._cellId;
  }

  private _cell(): ICodeCellModel | null {
    const cell = findCell(this._model, this._cellId);
    return isCode(cell) ? cell : null;
  }

  private _onIOPub(_: Kernel.IKernelConnection, msg: KM.IIOPubMessage): void {
    const parent = (msg.parent_header as Partial<KM.IHeader>).msg_id;
    if (msg.header.msg_type === 'comm_msg') {
      const content = msg.content as KM.ICommMsgMsg['content'];
      const data = content.data as { type?: unknown; execution_count?: unknown };
      if (content.comm_id === this._comm.commId && data.type === 'external_run') {
        this._runId = parent ?? null;
        const cell = this._cell();
        if (cell !== null) {
          // The request's execute_input came before this message: its count is here.
          const count = data.execution_count;
          cell.executionCount = typeof count === 'number' ? count : null;
          cell.executionState = 'running';
        }
      }
      return;
    }
    if (this._runId === null || parent !== this._runId) {
      return;
    }
    this._apply(msg);
  }

  private _apply(msg: KM.IIOPubMessage): void {
    const cell = this._cell();
    const type = msg.header.msg_type;
    if (type === 'status') {
      if ((msg.content as { execution_state?: string }).execution_state === 'idle') {
        this._done();
      }
      return;
    }
    if (cell === null) {
      return; // the user deleted the cell: the run goes on, unseen here no more
    }
    if (type === 'execute_input') {
      cell.executionCount = (msg.content as { execution_count: number }).execution_count;
    } else if (type === 'clear_output') {
      cell.outputs.clear((msg.content as { wait: boolean }).wait);
    } else {
      const output = outputOf(msg);
      if (output !== null) {
        cell.outputs.add(output);
      }
    }
  }

  private _done(): void {
    const cell = this._cell();
    if (cell !== null) {
      cell.executionState = 'idle';
    }
    this.dispose();
  }

  /** The kernel dropped the cell before it ran (no ack in time): take the cell away. */
  private _onClose(): void {
    if (this._runId !== null) {
      return; // closed after the run began: its outputs still come on IOPub
    }
    const index = cellIndex(this._model, this._cellId);
    if (index >= 0) {
      this._model.sharedModel.deleteCell(index);
    }
    this.dispose();
  }

  /** Stop following the kernel. */
  dispose(): void {
    if (!this._kernel.isDisposed) {
      this._kernel.iopubMessage.disconnect(this._onIOPub, this);
    }
  }

  private readonly _cellId: string;
  private _runId: string | null = null;
}
