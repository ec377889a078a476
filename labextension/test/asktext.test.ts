/**
 * The words the panel shows for an ask, its steps and its clock.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { askStatusText, phaseText, stepText, UNRESOLVED_TEXT } from '../src/asktext';
import type { IAskView, IStepView } from '../src/askview';

function ask(change: Partial<IAskView>): IAskView {
  return {
    cellId: 'c',
    askId: 'a',
    prompt: 'p',
    model: 'm',
    status: 'done',
    steps: [],
    answer: '',
    error: null,
    ...change
  };
}

function step(change: Partial<IStepView>): IStepView {
  return {
    step: 2,
    attempt: 1,
    status: 'ok',
    failedAttempts: 0,
    durationS: null,
    error: null,
    ...change
  };
}

describe('askStatusText', () => {
  test("an unresolved answer shows the kernel's sentence, never one made up here", () => {
    const message = "done with an unresolved error in step 2: NameError: name 'x' is not defined";
    const unresolved = { step: 2, error: "NameError: name 'x' is not defined", names: [], message };
    assert.equal(askStatusText(ask({ unresolved })), message);
  });

  test('one from an older record, without a sentence, says less', () => {
    const unresolved = { step: 2, error: 'E', names: [], message: '' };
    assert.equal(askStatusText(ask({ unresolved })), UNRESOLVED_TEXT);
    assert.equal(UNRESOLVED_TEXT, 'done · a step still failed');
    // An entry kept by an older version has no `message` field at all.
    const old = { step: 2, error: 'E' } as unknown as IAskView['unresolved'];
    assert.equal(askStatusText(ask({ unresolved: old })), UNRESOLVED_TEXT);
  });

  test('otherwise the status, or reused', () => {
    assert.equal(askStatusText(ask({})), 'done');
    assert.equal(askStatusText(ask({ status: 'running' })), 'running…');
    assert.equal(askStatusText(ask({ reused: true })), 'reused');
  });
});

describe('stepText', () => {
  test('says how the step went, and how long it took', () => {
    assert.equal(stepText(step({ durationS: 1.25 })), 'step 2 · done · 1.3 s');
    assert.equal(stepText(step({ failedAttempts: 1 })), 'step 2 · failed → fixed');
    assert.equal(stepText(step({ status: 'running', attempt: 2 })), 'step 2 · running (attempt 2)');
    assert.equal(stepText(step({ status: 'error' })), 'step 2 · failed');
    assert.equal(stepText(step({ status: 'timeout' })), 'step 2 · timeout');
  });

  test('names the package an install step installs', () => {
    assert.equal(
      stepText(step({ kind: 'install', package: 'pandas', status: 'running' })),
      'step 2 · install pandas · running'
    );
    assert.equal(stepText(step({ kind: 'retry', package: 'pandas' })), 'step 2 · done');
  });
});

describe('phaseText', () => {
  test('what the ask does and for how many whole seconds', () => {
    assert.equal(phaseText({ what: 'thinking', since: 1000 }, 5900), 'thinking · 4 s');
    assert.equal(phaseText({ what: 'running', since: 1000 }, 900), 'running a step · 0 s');
    assert.equal(phaseText({ what: 'waiting', since: 0, question: 'y/n?' }, 2000), 'waiting for your answer · 2 s');
  });
});
