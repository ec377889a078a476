/**
 * Approval answers as the kernel reads them (jupyter_ci.agent.approval.parse_answer), which
 * questions the page answers itself, and the stdin requests it answers.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { Kernel } from '@jupyterlab/services';

import { approvalOf, approvalText, planAnswer, stepAnswer } from '../src/question';
import { phaseText } from '../src/asktext';
import type { IWaitingForUser } from '../src/protocol';
import { PendingInputs, questionOf, repliedTo } from '../src/stdinreply';

function waiting(fields: Partial<IWaitingForUser>): IWaitingForUser {
  return {
    type: 'waiting_for_user',
    ask_id: 'a1',
    question: 'jupyter-ci: run step 1? ',
    kind: 'step',
    step: 1,
    attempt: 1,
    code: 'x = 1',
    plan: null,
    edits: null,
    ...fields
  };
}

/** A message of the kernel connection as its anyMessage signal gives it. */
function message(
  direction: 'send' | 'recv',
  channel: string,
  msgType: string,
  content: object,
  parent: object = {}
): Kernel.IAnyMessageArgs {
  const header = { msg_id: `m-${msgType}`, msg_type: msgType, session: 's', version: '5.3' };
  const msg = { channel, header, parent_header: parent, metadata: {}, content };
  return { direction, msg } as unknown as Kernel.IAnyMessageArgs;
}

describe('answers', () => {
  test('a step runs as proposed, or edited with the code it holds now', () => {
    assert.deepEqual(JSON.parse(stepAnswer('run', 'x = 1', 'x = 1')), { decision: 'run' });
    assert.deepEqual(JSON.parse(stepAnswer('run', 'x = 1', 'x = 2\n')), {
      decision: 'edit',
      code: 'x = 2\n'
    });
    assert.deepEqual(JSON.parse(stepAnswer('skip', 'x = 1', 'x = 2')), { decision: 'skip' });
    assert.deepEqual(JSON.parse(stepAnswer('stop', 'x = 1', 'x = 2')), { decision: 'stop' });
  });

  test('a plan is approved as proposed, or with the edited text; or the ask stops', () => {
    assert.deepEqual(JSON.parse(planAnswer('run', '1. load', '1. load')), { decision: 'run' });
    assert.deepEqual(JSON.parse(planAnswer('run', '1. load', '1. load\n2. plot')), {
      decision: 'edit',
      plan: '1. load\n2. plot'
    });
    assert.deepEqual(JSON.parse(planAnswer('stop', '1. load', 'other')), { decision: 'stop' });
  });
});

describe('approvalOf', () => {
  test('takes steps and plans the kernel asks about on stdin', () => {
    const step = approvalOf(waiting({}));
    assert.deepEqual(step, {
      askId: 'a1',
      kind: 'step',
      question: 'jupyter-ci: run step 1? ',
      step: 1,
      attempt: 1,
      code: 'x = 1',
      plan: ''
    });
    const plan = approvalOf(
      waiting({ kind: 'plan', step: null, attempt: null, code: null, plan: '1. a' })
    );
    assert.equal(plan?.kind, 'plan');
    assert.equal(plan?.plan, '1. a');
    assert.match(approvalText(plan!), /plan/);
    assert.match(approvalText(approvalOf(waiting({ attempt: 2 }))!), /Step 1 \(a fix, attempt 2\)/);
  });

  test('leaves installs, edits, old kernels and foreign prompts to others', () => {
    assert.equal(approvalOf(waiting({ kind: 'install' })), null);
    assert.equal(approvalOf(waiting({ kind: 'edits' })), null);
    assert.equal(approvalOf(waiting({ kind: undefined })), null);
    assert.equal(approvalOf(waiting({ question: 'Run step 1?' })), null);
  });
});

describe('stdin requests', () => {
  test('a received input_request with a jupyter-ci prompt is a question', () => {
    const prompt = 'jupyter-ci: run step 1? ';
    const request = message('recv', 'stdin', 'input_request', { prompt, password: false });
    assert.deepEqual(questionOf(request), {
      prompt,
      header: request.msg.header
    });
    assert.equal(questionOf(message('recv', 'stdin', 'input_request', { prompt: 'Name? ' })), null);
    const ours = { prompt: 'jupyter-ci: x' };
    assert.equal(questionOf(message('send', 'stdin', 'input_request', ours)), null);
    assert.equal(questionOf(message('recv', 'iopub', 'stream', ours)), null);
  });

  test('a sent input_reply names the request it answers', () => {
    const content = { status: 'ok', value: 'y' };
    const reply = message('send', 'stdin', 'input_reply', content, { msg_id: 'r1' });
    assert.equal(repliedTo(reply), 'r1');
    assert.equal(repliedTo(message('recv', 'stdin', 'input_request', {})), null);
  });

  test('pending requests match by prompt, the latest first; a reply forgets them', () => {
    const pending = new PendingInputs();
    const header = (id: string) => ({ msg_id: id }) as never;
    pending.add({ prompt: 'jupyter-ci: q1', header: header('old') });
    pending.add({ prompt: 'jupyter-ci: q1', header: header('new') });
    pending.add({ prompt: 'jupyter-ci: q2', header: header('two') });
    assert.equal(pending.has('jupyter-ci: q1'), true);
    assert.deepEqual(pending.take('jupyter-ci: q1'), { msg_id: 'new' });
    assert.equal(pending.take('jupyter-ci: q1'), null);
    pending.forgetReplied('two');
    assert.equal(pending.has('jupyter-ci: q2'), false);
  });
});

describe('the panel clock', () => {
  test('says a step or plan waits for approval, an install for an answer', () => {
    const waiting = (kind: 'step' | 'plan' | 'install') =>
      ({ what: 'waiting', since: 0, kind }) as const;
    assert.equal(phaseText(waiting('step'), 4000), 'waiting for your approval · 4 s');
    assert.equal(phaseText(waiting('plan'), 0), 'waiting for your approval · 0 s');
    assert.equal(phaseText(waiting('install'), 0), 'waiting for your answer · 0 s');
  });
});
