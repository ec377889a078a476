/**
 * Reading kernel messages (docs/protocol.md section 2).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { errorText, isKnown, KNOWN_TYPES, parseMessage, PROTOCOL_VERSION } from '../src/protocol';

// lib-test/test/ -> the repository's docs/ folder.
const DOC = join(__dirname, '..', '..', '..', 'docs', 'protocol.md');

function protocolDoc(): string {
  return readFileSync(DOC, 'utf-8');
}

/** The message types in the first column of the table of docs/protocol.md section 2. */
function documentedTypes(): string[] {
  const section = protocolDoc().split('\n## 2.')[1].split('\n## 3.')[0];
  const types = [...section.matchAll(/^\| `(\w+)` \|/gm)].map(m => m[1]);
  // The state and reuse messages are described below the table.
  for (const m of section.matchAll(/"type": "(\w+)"/g)) {
    types.push(m[1]);
  }
  return types;
}

describe('protocol version', () => {
  test('is 2, as the document says', () => {
    assert.equal(PROTOCOL_VERSION, 2);
    assert.match(protocolDoc(), /^# .*\(protocol version 2\)/);
    assert.match(protocolDoc(), /"protocol": 2,/);
  });
});

describe('parseMessage', () => {
  test('the types this page knows are exactly those the protocol documents', () => {
    const types = documentedTypes();
    assert.ok(types.includes('ask_start') && types.includes('ask_reused'), String(types));
    assert.deepEqual([...types].sort(), [...KNOWN_TYPES].sort());
    for (const type of types) {
      const data = { type, ask_id: 'a1', protocol: PROTOCOL_VERSION };
      const message = parseMessage(data);
      assert.equal(message, data, type);
      assert.ok(message !== null && isKnown(message), type);
    }
  });

  test('version 1 names are gone', () => {
    for (const type of ['answer_delta', 'context']) {
      assert.ok(!KNOWN_TYPES.includes(type), type);
      assert.ok(!documentedTypes().includes(type), type);
    }
  });

  test('takes an event of a type it does not know, for the handlers to ignore', () => {
    for (const type of ['ask_begin', 'toString', 'constructor', 'future_event', '']) {
      const data = { type, ask_id: 'a1', protocol: 3, anything: [1] };
      const message = parseMessage(data);
      assert.equal(message, data, type);
      assert.ok(message !== null && !isKnown(message), type);
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
      { type: 7, ask_id: 'a1' },
      { type: null, ask_id: 'a1' },
      { type: 'step_start' },
      { type: 'step_start', ask_id: 7 },
      { type: 'step_start', ask_id: null }
    ];
    for (const data of refused) {
      assert.equal(parseMessage(data), null, JSON.stringify(data));
    }
  });
});

describe('errorText', () => {
  test('is the message, with what to do on the next line when there is a hint', () => {
    assert.equal(errorText(null), null);
    assert.equal(errorText({ message: 'No key.', hint: '', type: 'ModelConfigError' }), 'No key.');
    assert.equal(
      errorText({ message: 'No key.', hint: 'Set OPENAI_API_KEY.', type: 'ModelConfigError' }),
      'No key.\nSet OPENAI_API_KEY.'
    );
  });
});
