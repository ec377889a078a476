/**
 * Which metadata changes are JupyterLab describing the kernel (a notebook just opened stays
 * clean through them) and which are the user's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { YNotebook } from '@jupyter/ydoc';
import type { INotebookModel } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';

// The Yjs instance @jupyter/ydoc's documents are made with (its ES module, not the CommonJS
// build a plain require gives: the two cannot read each other's documents).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Y = require(require.resolve('yjs').replace(/yjs\.cjs$/, 'yjs.mjs')) as typeof import('yjs');

import { describesKernel, holdKernelInfo, restatesKernel } from '../src/kernelmetadata';

const spec = (name: string, display: string) => ({ name, display_name: display, language: 'python' });

test('the kernel describing itself is not a change of the notebook', () => {
  assert.equal(describesKernel({ key: 'language_info', newValue: { name: 'python' } }), true);
  assert.equal(
    describesKernel({
      key: 'kernelspec',
      oldValue: spec('python3', 'Python 3'),
      newValue: spec('python3', 'Python 3 (ipykernel)')
    }),
    true
  );
});

test('another kernel, or any other metadata, is a change', () => {
  assert.equal(
    describesKernel({
      key: 'kernelspec',
      oldValue: spec('python3', 'Python 3'),
      newValue: spec('ir', 'R')
    }),
    false
  );
  assert.equal(describesKernel({ key: 'kernelspec', newValue: spec('python3', 'P') }), false);
  assert.equal(describesKernel({ key: 'jupyter_ci', newValue: {} }), false);
});

test('under collaboration, a restated kernel stays out of the notebook; another language not', () => {
  const python = spec('python3', 'Python 3');
  const info = { name: 'python', version: '3.11.7' };
  const restates = (oldValue: unknown, newValue: unknown, kernelspec: unknown = python) =>
    restatesKernel({ key: 'language_info', oldValue, newValue }, kernelspec);
  assert.equal(restates(undefined, info), true, 'the language the kernelspec names');
  assert.equal(restates({ name: 'python', version: '3.9' }, info), true, 'another version');
  assert.equal(restates(undefined, { name: 'R' }), false, 'another language');
  assert.equal(restates({ name: 'python' }, { name: 'R' }), false);
  assert.equal(restates(undefined, info, null), false, 'nothing to say it is the same');
  const kernelspec = { key: 'kernelspec', oldValue: python, newValue: spec('python3', 'Py') };
  assert.equal(restatesKernel(kernelspec, python), true);
  assert.equal(restatesKernel({ ...kernelspec, newValue: spec('ir', 'R') }, python), false);
  assert.equal(restatesKernel({ key: 'jupyter_ci', newValue: {} }, python), false);
});

test("JupyterLab's placeholder language says nothing: the kernelspec's language does", () => {
  const python = spec('python3', 'Python 3');
  const change = { key: 'language_info', oldValue: { name: '' }, newValue: { name: 'python' } };
  assert.equal(restatesKernel(change, python), true);
  assert.equal(restatesKernel({ ...change, newValue: { name: 'R' } }, python), false);
});

/** A shared notebook as a page holds it, and the server's copy it syncs with. */
function sharedPair(metadata: Record<string, unknown>) {
  // The server loads the file, adding its placeholders (jupyter_ydoc); the page syncs with it.
  const server = YNotebook.create({
    data: {
      metadata: {
        ...metadata,
        language_info: { name: '' },
        ...('kernelspec' in metadata ? {} : { kernelspec: { name: '', display_name: '' } })
      },
      cells: [{ cell_type: 'code', source: 'x = 1', metadata: {}, outputs: [], execution_count: null }]
    } as unknown as NonNullable<Parameters<typeof YNotebook.create>[0]>['data']
  });
  const page = new YNotebook();
  const model = {
    collaborative: true,
    isDisposed: false,
    sharedModel: page,
    metadataChanged: new Signal<unknown, { key: string }>({})
  };
  holdKernelInfo(model as unknown as INotebookModel);
  page.ydoc.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'server') {
      Y.applyUpdate(server.ydoc, update, 'page');
    }
  });
  server.ydoc.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'page') {
      Y.applyUpdate(page.ydoc, update, 'server');
    }
  });
  Y.applyUpdate(page.ydoc, Y.encodeStateAsUpdate(server.ydoc), 'server');
  const dispose = (): void => {
    page.dispose();
    server.dispose();
  };
  return { server, page, model, dispose };
}

const settle = (): Promise<void> => new Promise(resolve => setTimeout(resolve, 0));
const pythonInfo = { name: 'python', version: '3.11.7', file_extension: '.py' };

test('a shared notebook opened keeps the kernel out of the server copy; the page reads it', async () => {
  const { server, page, model, dispose } = sharedPair({ kernelspec: spec('python3', 'Python 3') });
  const seen: string[] = [];
  model.metadataChanged.connect((_, change) => seen.push(change.key));
  await settle();
  // The server's placeholder went: its save leaves the file as it was.
  assert.equal(server.getMetadata('language_info'), undefined);
  page.setMetadata('language_info', pythonInfo); // as JupyterLab does when the kernel connects
  page.setMetadata('kernelspec', spec('python3', 'Python 3 (ipykernel)'));
  assert.deepEqual(server.getMetadata(), { kernelspec: spec('python3', 'Python 3') });
  assert.deepEqual(page.getMetadata('language_info'), pythonInfo, 'the editors read it');
  assert.ok(seen.includes('language_info'));
  // The user's first edit brings them in, as JupyterLab would have written them.
  page.getCell(0).setSource('x = 2');
  assert.deepEqual(server.getMetadata('language_info'), pythonInfo);
  assert.deepEqual(server.getMetadata('kernelspec'), spec('python3', 'Python 3 (ipykernel)'));
  dispose();
});

test('a kernel of another language changes a shared notebook at once', async () => {
  const { server, page, dispose } = sharedPair({ kernelspec: spec('python3', 'Python 3') });
  await settle();
  page.setMetadata('kernelspec', spec('ir', 'R'));
  page.setMetadata('language_info', { name: 'R' });
  assert.deepEqual(server.getMetadata('kernelspec'), spec('ir', 'R'));
  assert.deepEqual(server.getMetadata('language_info'), { name: 'R' });
  dispose();
});
