/**
 * Which metadata changes are JupyterLab describing the kernel (a notebook just opened stays
 * clean through them) and which are the user's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describesKernel } from '../src/kernelmetadata';

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
