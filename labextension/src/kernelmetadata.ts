/**
 * Opening a notebook does not modify it. JupyterLab writes what the kernel says of itself
 * into the notebook's metadata as the kernel connects (`language_info`, the kernelspec's
 * display name): a notebook made elsewhere (the example, one from another Python) would show
 * as modified before the user did anything, and ask to be saved on close.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';

/** The metadata change: its key, and the values before and after. */
interface IChange {
  key: string;
  oldValue?: unknown;
  newValue?: unknown;
}

/** Tell a change JupyterLab makes from the kernel's own description of itself. */
export function describesKernel(change: IChange): boolean {
  if (change.key === 'language_info') {
    return true;
  }
  // The same kernel, named again (its display name or language): another kernel is a change.
  const name = (value: unknown): unknown =>
    value && typeof value === 'object' ? (value as { name?: unknown }).name : undefined;
  return (
    change.key === 'kernelspec' &&
    name(change.oldValue) !== undefined &&
    name(change.oldValue) === name(change.newValue)
  );
}

/** Keep a clean notebook clean when only the kernel's description changes in it. */
export function keepCleanOnKernelInfo(panel: NotebookPanel): void {
  // From the start: the kernel may connect before the document's context is ready.
  const model = panel.context.model;
  model.metadataChanged.connect((_, change) => {
    // Emitted inside the change, before the model marks itself dirty: reset after it.
    if (!model.dirty && describesKernel(change)) {
      void Promise.resolve().then(() => {
        if (!model.isDisposed) {
          model.dirty = false;
        }
      });
    }
  });
}
