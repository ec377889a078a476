/**
 * Opening a notebook does not modify it. JupyterLab writes what the kernel says of itself
 * into the notebook's metadata as the kernel connects (`language_info`, the kernelspec's
 * display name): a notebook made elsewhere (the example, one from another Python) would show
 * as modified before the user did anything, and ask to be saved on close.
 *
 * Without real-time collaboration the change stays in the page's model, which is kept clean.
 * With it the model is a document shared with the server, which saves it to the file a second
 * after any change: so there the kernel's description of itself waits in this page (which
 * reads it from there: the code cells' editors take their language from it) until the notebook
 * changes for another reason; a kernel of another language changes the notebook at once.
 */
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';

/** The metadata change: its key, and the values before and after. */
interface IChange {
  key: string;
  oldValue?: unknown;
  newValue?: unknown;
}

/** The `name` field of a metadata value, if it has one. */
function nameOf(value: unknown): unknown {
  return value && typeof value === 'object' ? (value as { name?: unknown }).name : undefined;
}

/** Tell a change JupyterLab makes from the kernel's own description of itself. */
export function describesKernel(change: IChange): boolean {
  if (change.key === 'language_info') {
    return true;
  }
  // The same kernel, named again (its display name or language): another kernel is a change.
  return (
    change.key === 'kernelspec' &&
    nameOf(change.oldValue) !== undefined &&
    nameOf(change.oldValue) === nameOf(change.newValue)
  );
}

/**
 * Tell a kernel description that says nothing new of the notebook: the same kernel named
 * again, or the language the notebook is in already (by its `language_info`, else, when that
 * is missing or JupyterLab's placeholder, its kernelspec's `language`), described in more
 * detail.
 */
export function restatesKernel(change: IChange, kernelspec: unknown): boolean {
  if (change.key !== 'language_info') {
    return describesKernel(change);
  }
  const language = nameOf(change.newValue);
  const old = nameOf(change.oldValue);
  const known =
    old !== undefined && old !== ''
      ? old
      : (kernelspec as { language?: unknown } | null | undefined)?.language;
  return typeof language === 'string' && language === known;
}

/** Keep a clean notebook clean when only the kernel's description changes in it. */
export function keepCleanOnKernelInfo(panel: NotebookPanel): void {
  // From the start: the kernel may connect before the document's context is ready.
  const model = panel.context.model;
  if (model.collaborative === true) {
    return; // held back from the shared model since the model was made (holdKernelInfo)
  }
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

/** A model factory, as far as it is wrapped here (the notebook's, in the document registry). */
interface IModelFactory {
  createNew(...args: unknown[]): unknown;
}

/** Hold back the kernel's description of itself in every shared notebook model made from now. */
export function holdKernelInfoOfNewModels(factory: IModelFactory | undefined): void {
  if (factory === undefined) {
    return;
  }
  const create = factory.createNew.bind(factory);
  factory.createNew = (...args: unknown[]): unknown => {
    const model = create(...args) as INotebookModel;
    if (model.collaborative === true) {
      holdKernelInfo(model);
    }
    return model;
  };
}

/** The shared notebook's parts used here (@jupyter/ydoc's YNotebook). */
interface ISharedNotebook {
  getMetadata(key?: string): unknown;
  setMetadata(key: unknown, value?: unknown): void;
  deleteMetadata(key: string): void;
  readonly ydoc: { on(name: 'afterTransaction', f: (t: ITransaction) => void): void;
    off(name: 'afterTransaction', f: (t: ITransaction) => void): void };
  readonly ystate: unknown;
}

/** A Yjs transaction, as far as it is read here. */
interface ITransaction {
  readonly local: boolean;
  readonly changed: Map<unknown, unknown>;
}

/** Tell JupyterLab's placeholder for a missing `language_info` or `kernelspec` (`name: ''`). */
function isPlaceholder(key: string, value: unknown): boolean {
  return (key === 'language_info' || key === 'kernelspec') && nameOf(value) === '';
}

/**
 * Keep the kernel's description of itself (and JupyterLab's placeholders for it) out of a
 * shared model until this page changes the notebook: the writes wait here, where the model's
 * metadata reads see them, and go into the shared model with this page's first change of
 * another kind (the user's edit, a run), as JupyterLab would have written them. The server
 * adds the placeholders itself as it loads a notebook without them (jupyter_ydoc), and saves
 * the notebook as soon as a page opens it: they go, so that save leaves the file as it was.
 */
export function holdKernelInfo(model: INotebookModel): void {
  const shared = model.sharedModel as unknown as ISharedNotebook;
  const write = shared.setMetadata.bind(shared);
  const read = shared.getMetadata.bind(shared);
  const waiting = new Map<string, unknown>();
  const known = (key: string): unknown => {
    const value = read(key);
    return isPlaceholder(key, value) ? undefined : value;
  };
  const held = (key: string, value: unknown): boolean =>
    isPlaceholder(key, value) ||
    restatesKernel({ key, oldValue: waiting.get(key) ?? known(key), newValue: value }, known('kernelspec'));
  shared.setMetadata = (key: unknown, value?: unknown): void => {
    if (typeof key !== 'string' || value === undefined || !held(key, value)) {
      write(key, value);
      return;
    }
    const oldValue = shared.getMetadata(key);
    waiting.set(key, value);
    // As the page reads the model, its metadata changed: the editors take their language from it.
    const changed = model.metadataChanged as unknown as { emit(change: object): void };
    changed.emit({ key, type: oldValue === undefined ? 'add' : 'change', oldValue, newValue: value });
  };
  shared.getMetadata = (key?: string): unknown =>
    key !== undefined && waiting.has(key) && known(key) === undefined ? waiting.get(key) : read(key);
  let cleaning = false;
  let released = false;
  const clean = (): void => {
    cleaning = true;
    try {
      for (const key of ['language_info', 'kernelspec'].filter(k => isPlaceholder(k, read(k)))) {
        shared.deleteMetadata(key);
      }
    } finally {
      cleaning = false;
    }
  };
  const release = (transaction: ITransaction): void => {
    if (!transaction.local) {
      void Promise.resolve().then(() => !released && !model.isDisposed && clean());
      return; // another page's change, or the server's (the notebook as it loaded it)
    }
    if (cleaning || ![...transaction.changed.keys()].some(type => type !== shared.ystate)) {
      return; // the placeholders going, or the document's own state (its id, its dirty flag)
    }
    released = true;
    shared.ydoc.off('afterTransaction', release);
    shared.setMetadata = write;
    shared.getMetadata = read;
    for (const [key, value] of waiting) {
      write(key, value);
    }
    waiting.clear();
  };
  shared.ydoc.on('afterTransaction', release);
}
