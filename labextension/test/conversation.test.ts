/**
 * What the side panel shows for one notebook, fed the kernel's messages.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Conversation } from '../src/conversation';
import { parseMessage } from '../src/protocol';
import type { IAskReused } from '../src/protocol';
import type { IWireAskRecord } from '../src/protocol.generated';
import type { IRecordedAsk } from '../src/records';

import { askEnd, askStart, stepEnd, stepStart } from './messages';

/** A conversation and the number of times it said it changed. */
function watched(): { conversation: Conversation; changes: () => number } {
  const conversation = new Conversation();
  let count = 0;
  conversation.changed.connect(() => {
    count++;
  });
  return { conversation, changes: () => count };
}

describe('Conversation', () => {
  test('an answer over a step that still fails keeps the step and error, unlike a clean one', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.stepStart(stepStart('a1', 1, 1));
    conversation.stepEnd(stepEnd('a1', 1, 'error'));
    const unresolved = {
      step: 1,
      error: "NameError: name 'y' is not defined",
      names: [],
      message: "done with an unresolved error in step 1: NameError: name 'y' is not defined"
    };
    conversation.end({ ...askEnd('a1', 'done', 'March.'), unresolved });
    assert.equal(conversation.asks[0].status, 'done');
    assert.deepEqual(conversation.asks[0].unresolved, unresolved);
    conversation.start(askStart('c2', 'a2'));
    conversation.end(askEnd('a2', 'done', 'Clean.'));
    assert.equal(conversation.asks[1].unresolved, null);
  });

  test('a prompt sent from the panel becomes the ask the kernel starts', () => {
    const { conversation, changes } = watched();
    conversation.addPending('c1', 'plot it', '');
    assert.equal(conversation.asks[0].status, 'pending');
    assert.equal(conversation.busy, true);
    conversation.start(askStart('c1', 'a1'));
    assert.equal(conversation.asks.length, 1);
    assert.deepEqual(
      { askId: conversation.asks[0].askId, status: conversation.asks[0].status },
      { askId: 'a1', status: 'running' }
    );
    assert.equal(conversation.asks[0].model, 'openai:m');
    assert.equal(changes(), 2);
  });

  test('an ask typed in a cell gets its own entry', () => {
    const { conversation } = watched();
    conversation.addPending('c1', 'first', '');
    conversation.start(askStart('c2', 'a2', 'second'));
    assert.deepEqual(
      conversation.asks.map(a => [a.cellId, a.status]),
      [
        ['c1', 'pending'],
        ['c2', 'running']
      ]
    );
  });

  test('steps, retries, streamed text and the answer', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.stepStart(stepStart('a1', 1, 1));
    conversation.stepEnd(stepEnd('a1', 1, 'error'));
    const step = conversation.asks[0].steps[0];
    assert.equal(step.error, "NameError: name 'y' is not defined");
    assert.equal(step.failedAttempts, 1);
    conversation.stepStart(stepStart('a1', 1, 2));
    assert.equal(conversation.asks[0].steps.length, 1);
    assert.deepEqual([step.attempt, step.status, step.durationS], [2, 'running', null]);
    conversation.stepEnd(stepEnd('a1', 1, 'ok'));
    assert.deepEqual([step.status, step.failedAttempts, step.error], ['ok', 1, null]);
    assert.equal(step.durationS, 0.25);
    conversation.text('a1', 'The ');
    conversation.text('a1', 'mean');
    assert.equal(conversation.asks[0].answer, 'The mean');
    conversation.end(askEnd('a1', 'done', 'The mean is 3.'));
    assert.equal(conversation.asks[0].answer, 'The mean is 3.');
    assert.equal(conversation.asks[0].status, 'done');
    assert.equal(conversation.busy, false);
  });

  test('an ask that ends mid-step marks that step interrupted and keeps streamed text', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.stepStart(stepStart('a1', 1, 1));
    conversation.stepEnd(stepEnd('a1', 1, 'ok'));
    conversation.stepStart(stepStart('a1', 2, 1));
    conversation.text('a1', 'partial');
    conversation.end(askEnd('a1', 'interrupted', ''));
    const ask = conversation.asks[0];
    assert.deepEqual(ask.steps.map(s => s.status), ['ok', 'interrupted']);
    assert.equal(ask.answer, 'partial');
    assert.equal(ask.status, 'interrupted');
  });

  test('messages of an unknown ask change nothing', () => {
    const { conversation, changes } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.stepStart(stepStart('other', 1, 1));
    conversation.stepEnd(stepEnd('other', 1, 'ok'));
    conversation.text('other', 'x');
    conversation.thinking('other');
    conversation.waitingForUser('other', 'Install pandas?');
    conversation.requestSent({ type: 'request_sent', ask_id: 'other', parts: [] });
    conversation.end(askEnd('other', 'done', 'x'));
    conversation.abandon('other', 'gone');
    assert.equal(changes(), 1);
    assert.deepEqual(conversation.asks[0].steps, []);
    assert.equal(conversation.asks[0].status, 'running');
  });

  test('follow applies the events of an ask under way, as the kernel sends them', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    const events = [
      { type: 'request_sent', parts: [{ name: 'system', tokens: 3, text: 'Be brief.' }] },
      { type: 'thinking' },
      { type: 'text', delta: 'Loading ' },
      { type: 'step_start', step: 1, attempt: 1, code: '', kind: 'install', package: 'pandas' },
      { type: 'step_end', step: 1, attempt: 1, status: 'ok', execution_count: null, duration_ms: 1500, error: null },
      { type: 'step_sent_back', step: 1, message: 'Step 1 reads x.' },
      { type: 'warning', message: 'The model retires soon.' },
      { type: 'request_sent', parts: [{ name: 'system', tokens: 4, text: 'Be briefer.' }] },
      { type: 'text', delta: 'done.' }
    ];
    for (const event of events) {
      const message = parseMessage({ ...event, ask_id: 'a1', protocol: 2 });
      assert.ok(message !== null);
      conversation.follow(message);
    }
    const ask = conversation.asks[0];
    assert.equal(ask.answer, 'Loading done.');
    assert.deepEqual(ask.sent, [{ name: 'system', tokens: 4, text: 'Be briefer.' }]);
    assert.deepEqual(
      ask.steps.map(s => [s.step, s.kind, s.package, s.status, s.durationS]),
      [[1, 'install', 'pandas', 'ok', 1.5]]
    );
  });

  test('an event of a type this page does not know reaches follow and changes nothing', () => {
    const { conversation, changes } = watched();
    conversation.start(askStart('c1', 'a1'));
    const before = JSON.stringify(conversation.asks);
    const count = changes();
    const message = parseMessage({ type: 'tool_progress', ask_id: 'a1', protocol: 3, step: 1 });
    assert.ok(message !== null);
    conversation.follow(message);
    // Known types this entry does not use (the comm applies them) change nothing here either.
    conversation.follow({ type: 'ask_state', ask_id: 'a1' } as never);
    assert.equal(JSON.stringify(conversation.asks), before);
    assert.equal(changes(), count);
  });

  test('the clock follows the kernel: thinking, writing, waiting for the user, running', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    const phase = () => conversation.asks[0].phase;
    assert.equal(phase()?.what, 'thinking');
    const since = phase()?.since;
    conversation.thinking('a1');
    assert.equal(phase()?.since, since, 'still thinking: the clock goes on');
    conversation.text('a1', 'Let me see.');
    assert.deepEqual([phase()?.what, phase()?.since], ['writing', since]);
    conversation.waitingForUser('a1', 'Install pandas (y/n)?');
    assert.deepEqual([phase()?.what, phase()?.question], ['waiting', 'Install pandas (y/n)?']);
    conversation.stepStart(stepStart('a1', 1, 1));
    assert.equal(phase()?.what, 'running');
    conversation.thinking('a1');
    assert.equal(phase()?.what, 'thinking');
    conversation.end(askEnd('a1', 'done', 'ok'));
    assert.equal(phase(), null);
  });

  test('a failed ask shows the error with its hint', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    const error = { message: 'No key for openai.', hint: 'Paste one in Model keys.', type: 'ModelConfigError' };
    conversation.end({ ...askEnd('a1', 'failed', ''), error });
    assert.deepEqual([conversation.asks[0].status, conversation.asks[0].error], [
      'failed',
      'No key for openai.\nPaste one in Model keys.'
    ]);
  });

  test('a reused answer fills the pending entry without steps', () => {
    const { conversation } = watched();
    conversation.addPending('c1', 'plot it', '');
    const msg: IAskReused = {
      type: 'ask_reused',
      ask_id: 'a1',
      cell_id: 'c1',
      prompt: 'plot it',
      model: 'openai:m',
      answer: 'Done before.',
      steps: 2,
      pin: 'p1'
    };
    conversation.reused(msg);
    assert.equal(conversation.asks.length, 1);
    const ask = conversation.asks[0];
    assert.deepEqual(
      [ask.status, ask.answer, ask.reused, ask.askId, ask.steps.length],
      ['done', 'Done before.', true, 'a1', 0]
    );
  });

  test('each reuse of an ask updates its one entry (Restart & Run All, again and again)', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.end(askEnd('a1', 'done', 'Made.'));
    const msg: IAskReused = {
      type: 'ask_reused',
      ask_id: 'a1',
      cell_id: 'c1',
      prompt: 'plot it',
      model: 'openai:m',
      answer: 'Made.',
      steps: 0,
      pin: 'p1'
    };
    conversation.reused(msg);
    conversation.reused(msg);
    assert.equal(conversation.asks.length, 1);
    assert.deepEqual([conversation.asks[0].status, conversation.asks[0].reused], ['done', true]);
  });

  test('asks read from the notebook are added once, placed by when they ended, as unverified', () => {
    const { conversation, changes } = watched();
    conversation.start(askStart('c2', 'a2', 'later'));
    const record: IWireAskRecord = {
      version: 1,
      ask_id: 'a2',
      prompt_hash: 'h2',
      model: 'openai:m',
      status: 'done',
      answer: 'Two.',
      steps: 0,
      tokens: 0,
      created: '2026-11-02T00:00:00+00:00'
    };
    conversation.end({ ...askEnd('a2', 'done', 'Two.'), record });
    const recorded: IRecordedAsk = {
      cellId: 'c1',
      askId: 'a1',
      prompt: 'earlier',
      model: 'openai:m',
      status: 'done',
      answer: '**One.**',
      error: '',
      created: '2026-11-01T00:00:00+00:00',
      unresolved: null,
      steps: []
    };
    const before = changes();
    conversation.addRecorded([recorded, { ...recorded, askId: 'a2', prompt: 'again' }]);
    conversation.addRecorded([recorded]);
    assert.equal(changes(), before + 1);
    assert.deepEqual(conversation.asks.map(a => [a.prompt, a.fromNotebook === true]), [
      ['earlier', true],
      ['later', false]
    ]);
    // The kernel reuses only a record it signed: from then on it is its own account.
    conversation.reused({
      type: 'ask_reused',
      ask_id: 'a1',
      cell_id: 'c1',
      prompt: 'earlier',
      model: 'openai:m',
      answer: '**One.**',
      steps: 0,
      pin: 'p1'
    });
    assert.equal(conversation.asks.length, 2);
    assert.equal(conversation.asks[0].fromNotebook, false);
  });

  test('an ask or a reuse no cell asked (cell_id null, as a kernel may send) adds no entry', () => {
    const { conversation } = watched();
    conversation.start({ ...askStart('c1', 'a1'), cell_id: null });
    conversation.reused({
      type: 'ask_reused',
      ask_id: 'a2',
      cell_id: null,
      prompt: 'plot it',
      model: 'openai:m',
      answer: 'Made.',
      steps: 0,
      pin: 'p1'
    });
    assert.equal(conversation.asks.length, 0);
  });

  test('settlePending fails only the pending entry of that cell', () => {
    const { conversation } = watched();
    conversation.addPending('c1', 'one', '');
    conversation.addPending('c2', 'two', '');
    conversation.settlePending('c2', 'the cell failed before asking');
    assert.deepEqual(
      conversation.asks.map(a => [a.status, a.error]),
      [
        ['pending', null],
        ['failed', 'the cell failed before asking']
      ]
    );
  });

  test('abandon ends a running ask only', () => {
    const { conversation } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.end(askEnd('a1', 'done', 'ok'));
    conversation.start(askStart('c2', 'a2'));
    conversation.abandon('a1', 'comm closed');
    conversation.abandon('a2', 'comm closed');
    assert.deepEqual(
      conversation.asks.map(a => [a.status, a.error]),
      [
        ['done', null],
        ['failed', 'comm closed']
      ]
    );
  });

  test('kernelLost interrupts running and pending asks, and is quiet when there are none', () => {
    const { conversation, changes } = watched();
    conversation.start(askStart('c1', 'a1'));
    conversation.end(askEnd('a1', 'done', 'ok'));
    conversation.start(askStart('c2', 'a2'));
    conversation.addPending('c3', 'three', '');
    const before = changes();
    conversation.kernelLost('restarted');
    assert.equal(changes(), before + 1);
    assert.deepEqual(conversation.asks.map(a => a.status), ['done', 'interrupted', 'interrupted']);
    assert.equal(conversation.asks[2].error, 'restarted');
    conversation.kernelLost('again');
    assert.equal(changes(), before + 1);
  });
});
