/**
 * Reading the kernel's announcement of an MCP client's cell and its IOPub outputs
 * (docs/protocol.md section 5).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { KernelMessage as KM } from '@jupyterlab/services';

import { outputOf, parseExternal, samePath } from '../src/externalcells';

const CELL = { type: 'external_cell', id: 'a1', source: 'mcp', path: 'dir/nb.ipynb', code: '1' };

function iopub(type: string, content: Record<string, unknown>): KM.IIOPubMessage {
  return { header: { msg_type: type }, content } as unknown as KM.IIOPubMessage;
}

describe('parseExternal', () => {
  test('takes an external_cell announcement', () => {
    assert.deepEqual(parseExternal(CELL), CELL);
    assert.equal(parseExternal({ ...CELL, path: undefined })?.path, null);
  });

  test('refuses anything else', () => {
    assert.equal(parseExternal({ ...CELL, type: 'ask_start' }), null);
    assert.equal(parseExternal({ ...CELL, code: 3 }), null);
    assert.equal(parseExternal(null), null);
    assert.equal(parseExternal('external_cell'), null);
  });
});

describe('samePath', () => {
  test('ignores leading slashes; no path matches any notebook', () => {
    assert.ok(samePath('/dir/nb.ipynb', 'dir/nb.ipynb'));
    assert.ok(!samePath('dir/other.ipynb', 'dir/nb.ipynb'));
    assert.ok(samePath(null, 'dir/nb.ipynb'));
  });
});

describe('outputOf', () => {
  test('maps output messages to nbformat outputs, without transient data', () => {
    assert.deepEqual(outputOf(iopub('stream', { name: 'stdout', text: 'hi\n' })), {
      output_type: 'stream', name: 'stdout', text: 'hi\n'
    });
    const shown = outputOf(iopub('display_data', { data: {}, metadata: {}, transient: { display_id: 'x' } }));
    assert.deepEqual(shown, { output_type: 'display_data', data: {}, metadata: {} });
    assert.equal(outputOf(iopub('status', { execution_state: 'idle' })), null);
  });
});
