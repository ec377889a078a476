/**
 * How every kind of question is answered over the kernel's stdin (question.ts): at once
 * when the kernel waits, else once it asks; an answer of an ask that moved on never goes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import { QuestionReplies } from '../src/question';

// No views here: looking for Stdin boxes to hide finds none and asks for no further frame.
globalThis.requestAnimationFrame = (() => 0) as typeof requestAnimationFrame;

/** A kernel connection that asks on stdin and keeps the replies it is sent. */
class FakeKernel {
  isDisposed = false;
  readonly statusChanged = new Signal<this, Kernel.Status>(this);
  readonly anyMessage = new Signal<this, Kernel.IAnyMessageArgs>(this);
  readonly replies: [string, string][] = [];

  sendInputReply(content: { value: string }, parent: { msg_id: string }): void {
    this.replies.push([parent.msg_id, content.value]);
  }

  /** The kernel asks `prompt` on stdin (request `id`). */
  ask(prompt: string, id: string): void {
    const header = { msg_id: id, msg_type: 'input_request', session: 's', version: '5.3' };
    const msg = { channel: 'stdin', header, parent_header: {}, metadata: {}, content: { prompt } };
    this.anyMessage.emit({ direction: 'recv', msg } as unknown as Kernel.IAnyMessageArgs);
  }
}

function replies(): { replies: QuestionReplies; kernel: FakeKernel } {
  const kernel = new FakeKernel();
  const session = {
    session: { kernel },
    kernelChanged: new Signal<object, unknown>({})
  } as unknown as ISessionContext;
  return { replies: new QuestionReplies(session, () => [], () => true), kernel };
}

const Q1 = 'jupyter-ci: run step 1? ';
const Q2 = 'jupyter-ci: apply these edits? ';

describe('QuestionReplies', () => {
  test('answers at once when the kernel waits, else when it asks', () => {
    const { replies: r, kernel } = replies();
    kernel.ask(Q1, 'req-1');
    assert.equal(r.waits(Q1), true);
    r.send('a1', Q1, '{"decision": "run"}');
    r.send('a1', Q2, '{"decisions": {}}');
    assert.deepEqual(kernel.replies, [['req-1', '{"decision": "run"}']]);
    assert.equal(r.waits(Q1), false);
    kernel.ask(Q2, 'req-2');
    assert.deepEqual(kernel.replies.at(-1), ['req-2', '{"decisions": {}}']);
    kernel.ask(Q2, 'req-3'); // asked again: the answer went once
    assert.equal(kernel.replies.length, 2);
  });

  test('an answer of an ask that moved on, or of a question asked anew, never goes', () => {
    const { replies: r, kernel } = replies();
    r.send('a1', Q1, 'one');
    r.send('a2', Q2, 'two');
    r.forget('a1');
    r.discard(Q2);
    kernel.ask(Q1, 'req-1');
    kernel.ask(Q2, 'req-2');
    assert.deepEqual(kernel.replies, []);
    r.send('a3', Q1, 'three'); // the kernel still waits for this one
    assert.deepEqual(kernel.replies, [['req-1', 'three']]);
  });
});
