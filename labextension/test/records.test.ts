/**
 * A notebook's asks read back from its cells' records, for a browser that never saw them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { IRecordCell, promptOf, recordedAsks, unresolvedOf } from '../src/records';

function cell(id: string, source: string, record?: object): IRecordCell {
  return { id, cellType: 'code', source, metadata: record ? { jupyter_ci: record } : {} };
}

const attempt = (n: number, status: string, ename: string | null = null) => ({
  attempt: n,
  status,
  ename,
  evalue: ename ? 'bad' : null,
  duration_s: 0.5,
  code: 'x'
});

describe('recordedAsks', () => {
  test('reads each ask record with its steps from the generated cells', () => {
    const cells = [
      cell('n', 'x = 1'),
      cell('a', '%%ask --pin 0123456789 -m openai:m\nplot the sales', {
        ask_id: 'k1',
        status: 'done',
        model: 'openai:m',
        answer: 'Done **well**.',
        steps: 2,
        created: '2026-11-01T00:00:00+00:00',
        signature: 'hmac-sha256:00'
      }),
      cell('s1', 'y = 2', { ask_id: 'k1', step: 1, model: 'openai:m', attempts: [attempt(1, 'ok')] }),
      cell('s2', 'z', {
        ask_id: 'k1',
        step: 2,
        model: 'openai:m',
        attempts: [attempt(1, 'error', 'NameError'), attempt(2, 'ok')]
      }),
      cell('f', '%ask --timeout 5 -- -x marks it', {
        ask_id: 'k2',
        status: 'failed',
        model: 'openai:m',
        answer: 'The model could not be reached.',
        steps: 0
      })
    ];
    const asks = recordedAsks(cells);
    assert.deepEqual(
      asks.map(a => [a.cellId, a.askId, a.prompt, a.status, a.answer, a.error]),
      [
        ['a', 'k1', 'plot the sales', 'done', 'Done **well**.', ''],
        ['f', 'k2', '-x marks it', 'failed', '', 'The model could not be reached.']
      ]
    );
    assert.deepEqual(
      asks[0].steps.map(s => [s.step, s.status, s.failedAttempts, s.durationS]),
      [
        [1, 'ok', 0, 0.5],
        [2, 'ok', 1, 0.5]
      ]
    );
    assert.equal(asks[0].created, '2026-11-01T00:00:00+00:00');
  });

  test('ignores generated cells, unknown statuses and records that are not objects', () => {
    const cells = [
      cell('g', 'x', { ask_id: 'k', step: 1, status: 'done' }),
      cell('w', '%%ask\nx', { ask_id: 'k', status: 'weird' }),
      cell('s', '%%ask\nx', { ask_id: '', status: 'done' }),
      { id: 'l', cellType: 'code', source: '%%ask\nx', metadata: { jupyter_ci: ['done'] } }
    ];
    assert.deepEqual(recordedAsks(cells), []);
  });
});

describe('unresolvedOf', () => {
  test("reads the kernel's sentence and the names of a protocol 2 record", () => {
    const message = "done with an unresolved error in step 2: NameError: name 'x' is not defined";
    const value = { step: 2, error: "NameError: name 'x' is not defined", names: ['x', 3], message };
    assert.deepEqual(unresolvedOf(value), { ...value, names: ['x'] });
  });

  test('gives an older record no sentence (the panel says less), and no names', () => {
    assert.deepEqual(unresolvedOf({ step: 1, error: 'NameError: y' }), {
      step: 1,
      error: 'NameError: y',
      names: [],
      message: ''
    });
  });

  test('is null without a step', () => {
    for (const value of [null, undefined, 'step 1', { error: 'x' }, { step: '1' }]) {
      assert.equal(unresolvedOf(value), null, JSON.stringify(value));
    }
  });
});

describe('recordedAsks and unresolved steps', () => {
  test('an unresolved answer keeps what its record says', () => {
    const unresolved = { step: 1, error: 'E: x', names: [], message: 'done with an unresolved error in step 1: E: x' };
    const cells = [cell('a', '%%ask\nplot', { ask_id: 'k', status: 'done', answer: 'A', unresolved })];
    assert.deepEqual(recordedAsks(cells)[0].unresolved, unresolved);
  });
});

describe('promptOf', () => {
  test('takes the cell below the magic, else the words after its options', () => {
    assert.equal(promptOf('%%ask --refresh\n  plot it\n  by month '), 'plot it\n  by month');
    assert.equal(promptOf('%ask -m openai:m --max-steps 3 --new plot it'), 'plot it');
    assert.equal(promptOf('%ask --pin=abc plot it'), 'plot it');
  });
});
