/**
 * Reading kernel messages and cell records (docs/protocol.md sections 2 and 4).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { asGeneratedRecord, askIdOf, parseMessage } from '../src/protocol';

// lib-test/test/ -> the repository's docs/ folder.
const DOC = join(__dirname, '..', '..', '..', 'docs', 'protocol.md');

/** The message types in the first column of the table of docs/protocol.md section 2. */
function documentedTypes(): string[] {
  const text = readFileSync(DOC, 'utf-8');
  const section = text.split('\n## 2.')[1].split('\n## 3.')[0];
  const types = [...section.matchAll(/^\| `(\w+)` \|/gm)].map(m => m[1]);
  // The reuse message is described below the table.
  for (const m of section.matchAll(/"type": "(\w+)"/g)) {
    types.push(m[1]);
  }
  return types;
}

describe('parseMessage', () => {
  test('accepts every message type the protocol documents', () => {
    const types = documentedTypes();
    assert.ok(types.includes('ask_start') && types.includes('ask_reused'), String(types));
    for (const type of types) {
      const data = { type, ask_id: 'a1', protocol: 1 };
      assert.equal(parseMessage(data), data, type);
    }
  });

  test('refuses what is not a protocol message', () => {
    const refused: unknown[] = [
      null,
      undefined,
      'ask_start',
      42,
      [],
      { ask_id: 'a1' },
      { type: 'ask_begin', ask_id: 'a1' },
      { type: 'toString', ask_id: 'a1' },
      { type: 'step_start' },
      { type: 'step_start', ask_id: 7 },
      { type: 'step_start', ask_id: null }
    ];
    for (const data of refused) {
      assert.equal(parseMessage(data), null, JSON.stringify(data));
    }
  });
});

describe('asGeneratedRecord', () => {
  test('fills what an older or hand-edited record lacks', () => {
    assert.deepEqual(asGeneratedRecord({ ask_id: 'a1', step: 2 }), {
      ask_id: 'a1',
      step: 2,
      model: '',
      attempts: [],
      interrupted: undefined
    });
  });

  test('keeps the fields it knows and the interrupted flag only when true', () => {
    const attempts = [
      { attempt: 1, status: 'ok', ename: null, evalue: null, duration_s: 0.5, code: 'x = 1' }
    ];
    const full = { ask_id: 'a1', step: 1, model: 'openai:m', attempts, interrupted: true };
    assert.deepEqual(asGeneratedRecord({ ...full, extra: 'dropped' }), full);
    assert.equal(asGeneratedRecord({ ...full, interrupted: 'yes' })?.interrupted, undefined);
    assert.deepEqual(asGeneratedRecord({ ...full, model: 3, attempts: 'none' })?.attempts, []);
  });

  test('is null for an ask record and for non-records', () => {
    for (const value of [
      { ask_id: 'a1', status: 'done' },
      { step: 1 },
      { ask_id: 1, step: 1 },
      { ask_id: 'a1', step: '1' },
      'a1',
      null
    ]) {
      assert.equal(asGeneratedRecord(value), null, JSON.stringify(value));
    }
  });
});

describe('askIdOf', () => {
  test('reads the ask id of ask and generated records alike', () => {
    assert.equal(askIdOf({ ask_id: 'a1', status: 'done' }), 'a1');
    assert.equal(askIdOf({ ask_id: 'a2', step: 3 }), 'a2');
  });

  test('is null without a string ask id', () => {
    for (const value of [{}, { ask_id: 5 }, null, 'a1', undefined]) {
      assert.equal(askIdOf(value), null, JSON.stringify(value));
    }
  });
});
