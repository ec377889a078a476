/**
 * Put files the user gives the panel into the notebook's folder, through Jupyter's contents API.
 */
import { PathExt } from '@jupyterlab/coreutils';
import type { Contents } from '@jupyterlab/services';

/** The folder, next to the notebook, that uploads go into. */
export const UPLOAD_FOLDER = 'data';

/** Files above this are sent in pieces, as JupyterLab's file browser does. */
const CHUNK_BYTES = 4 * 1024 * 1024;

/** A file uploaded for the next ask. */
export interface IAttached {
  /** Relative to the notebook's folder: what the prompt mentions and the kernel opens. */
  relative: string;
  /** Relative to the server root. */
  path: string;
  size: number;
}

/** The file's own name, with nothing that could make it a path. */
export function safeName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const cleaned = base.replace(/[\u0000-\u001f]/g, '').trim();
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? 'upload' : cleaned;
}

/** `name` with ` (n)` before its extension, n = 1, 2, ...: a name that is not taken. */
export function numbered(name: string, n: number): string {
  const ext = PathExt.extname(name);
  const stem = ext ? name.slice(0, -ext.length) : name;
  return `${stem} (${n})${ext}`;
}

/** Tell the prompt about the attached files, in words the model and a reader understand. */
export function mentionFiles(prompt: string, files: IAttached[]): string {
  if (files.length === 0) {
    return prompt;
  }
  const list = files.map(f => `\`${f.relative}\``).join(', ');
  const noun = files.length === 1 ? 'File' : 'Files';
  return `${prompt.trim()}\n\n${noun} uploaded for this: ${list}`;
}

async function exists(contents: Contents.IManager, path: string): Promise<boolean> {
  try {
    await contents.get(path, { content: false });
    return true;
  } catch {
    return false;
  }
}

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  const step = 0x8000; // String.fromCharCode takes a bounded number of arguments
  for (let i = 0; i < bytes.length; i += step) {
    binary += String.fromCharCode(...bytes.subarray(i, i + step));
  }
  return btoa(binary);
}

/**
 * Upload `file` into `data/` beside the notebook at `notebookPath` (the folder is made when
 * missing); an existing file of that name is kept and the upload gets a numbered name.
 */
export async function uploadFile(
  contents: Contents.IManager,
  notebookPath: string,
  file: File
): Promise<IAttached> {
  const folder = PathExt.join(PathExt.dirname(notebookPath), UPLOAD_FOLDER);
  if (!(await exists(contents, folder))) {
    await contents.save(folder, { type: 'directory' });
  }
  const name = safeName(file.name);
  let chosen = name;
  for (let n = 1; await exists(contents, PathExt.join(folder, chosen)); n++) {
    chosen = numbered(name, n);
  }
  const path = PathExt.join(folder, chosen);
  const bytes = new Uint8Array(await file.arrayBuffer());
  const chunks = Math.max(1, Math.ceil(bytes.length / CHUNK_BYTES));
  for (let i = 0; i < chunks; i++) {
    const piece = bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
    const model: Partial<Contents.IModel> & { chunk?: number } = {
      type: 'file',
      format: 'base64',
      content: toBase64(piece)
    };
    if (chunks > 1) {
      // The contents API appends numbered chunks; -1 marks the last.
      model.chunk = i === chunks - 1 ? -1 : i + 1;
    }
    await contents.save(path, model);
  }
  return { relative: PathExt.join(UPLOAD_FOLDER, chosen), path, size: bytes.length };
}
