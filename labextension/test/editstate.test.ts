/**
 * The review of edits of the user's cells, as plain state (question.ts), and as the
 * conversation keeps it beside each ask's cost.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Conversation } from '../src/conversation';
import { Conversations } from '../src/conversationstore';
import {
  answerText,
  decide,
  editsOf,
  IEditReview,
  isDecided,
  openReview,
  reviewOf,
  reviewSummary
} from '../src/question';
import type { IAskEnd, IAskStart, IProposedEdit, IWaitingForUser } from '../src/protocol';

const QUESTION = 'jupyter-ci: review the proposed edits';

function edit(callId: string, cellId: string): IProposedEdit {
  return { call_id: callId, cell_id: cellId, old: 'x = 1', new: 'x = 2' };
}

function waiting(edits: IProposedEdit[] | null, kind: IWaitingForUser['kind'] = 'edits'): IWaitingForUser {
  return {
    type: 'waiting_for_user', ask_id: 'a1', question: QUESTION, kind,
    step: null, attempt: null, code: null, plan: null, edits
  };
}

function review(...ids: string[]): IEditReview {
  const made = reviewOf(waiting(ids.map((id, i) => edit(id, `cell-${i}`))));
  assert.ok(made !== null);
  return made;
}

describe('a review of edits', () => {
  test('comes only from a question of kind "edits" with edits', () => {
    assert.equal(reviewOf(waiting([edit('c1', 'x')], 'step')), null);
    assert.equal(reviewOf(waiting(null)), null);
    assert.equal(reviewOf(waiting([])), null);
    assert.equal(reviewOf({ type: 'waiting_for_user', ask_id: 'a1', question: 'Install x? [y/N] ' }), null);
    const made = review('c1');
    assert.deepEqual(made, {
      question: QUESTION,
      edits: [{ callId: 'c1', cellId: 'cell-0', old: 'x = 1', new: 'x = 2', decision: null }],
      state: 'open'
    });
  });

  test('answers {"decisions": ...} once every edit is decided', () => {
    const r = review('c1', 'c2');
    assert.deepEqual(decide(r, 'c2', 'rejected').map(e => e.callId), ['c2']);
    assert.equal(isDecided(r), false);
    assert.deepEqual(decide(r, 'c1', 'accepted').map(e => e.callId), ['c1']);
    assert.equal(isDecided(r), true);
    assert.deepEqual(JSON.parse(answerText(r)), { decisions: { c1: 'accepted', c2: 'rejected' } });
    assert.equal(answerText(r), '{"decisions":{"c1":"accepted","c2":"rejected"}}');
  });

  test('all at once decides only the undecided ones; a decided edit stays decided', () => {
    const r = review('c1', 'c2', 'c3');
    decide(r, 'c2', 'rejected');
    assert.deepEqual(decide(r, null, 'accepted').map(e => e.callId), ['c1', 'c3']);
    assert.deepEqual(decide(r, null, 'rejected'), []);
    assert.deepEqual(JSON.parse(answerText(r)).decisions, { c1: 'accepted', c2: 'rejected', c3: 'accepted' });
    assert.equal(reviewSummary(r), '3 proposed edits of your cells: 2 accepted, 1 rejected');
  });

  test('an accepted edit undone before the answer went is rejected', () => {
    const r = review('c1');
    decide(r, 'c1', 'accepted');
    r.edits[0].undone = true;
    assert.deepEqual(JSON.parse(answerText(r)).decisions, { c1: 'rejected' });
  });

  test('a review no longer open decides nothing', () => {
    const r = review('c1');
    r.state = 'answered';
    assert.deepEqual(decide(r, null, 'accepted'), []);
    assert.equal(openReview([r]), null);
    assert.equal(reviewSummary(r), '1 proposed edit of your cells: 1 to review');
    r.state = 'closed';
    assert.equal(reviewSummary(r), '1 proposed edit of your cells: 1 not reviewed (the ask ended)');
  });

  test('the edits of one cell, across reviews', () => {
    const a = review('c1', 'c2');
    const b = review('c3');
    assert.deepEqual(editsOf([a, b], 'cell-0').map(e => e.callId), ['c1', 'c3']);
    assert.deepEqual(editsOf([a, b], 'nope'), []);
  });
});

function askStart(): IAskStart {
  return {
    type: 'ask_start', ask_id: 'a1', cell_id: 'ask-cell', prompt: 'fix the cell above',
    model: 'openai:m', replace_ask_id: null, execution_count: 1
  };
}

function askEnd(fields: Partial<IAskEnd> = {}): IAskEnd {
  return {
    type: 'ask_end', ask_id: 'a1', status: 'done', answer: 'Fixed.', error: null, record: null,
    unresolved: null, steps: 0, tokens: 18, ...fields
  };
}

describe('the conversation', () => {
  test('keeps the edits an ask proposed and waits for the user', () => {
    const c = new Conversation();
    c.start(askStart());
    c.follow(waiting([edit('c1', 'cell-0')]));
    const ask = c.asks[0];
    assert.equal(ask.reviews?.length, 1);
    assert.equal(ask.phase?.what, 'waiting');
    assert.equal(openReview(ask.reviews)?.edits[0].callId, 'c1');
    // Another kind of question is no review.
    c.follow(waiting([edit('c9', 'cell-0')], 'step'));
    assert.equal(ask.reviews?.length, 1);
  });

  test('an ask that ends closes the review still open: nothing applies any more', () => {
    const c = new Conversation();
    c.start(askStart());
    c.follow(waiting([edit('c1', 'cell-0')]));
    c.end(askEnd({ status: 'interrupted' }));
    assert.equal(c.asks[0].reviews?.[0].state, 'closed');
  });

  test('adds up usage turns, then takes the end totals', () => {
    const c = new Conversation();
    c.start(askStart());
    c.follow({
      type: 'usage', ask_id: 'a1', input_tokens: 11, output_tokens: 7, ask_tokens: 18,
      cached_tokens: 0, cost_usd: 0.001, ask_cost_usd: 0.001, context_window: 1000
    });
    assert.equal(c.asks[0].cost?.inputTokens, 11);
    assert.equal(c.asks[0].cost?.costUsd, 0.001);
    c.end(askEnd({ usage: { input_tokens: 22, output_tokens: 14, cached_tokens: 3, cost_usd: 0.002 } }));
    assert.deepEqual(c.asks[0].cost, {
      inputTokens: 22, outputTokens: 14, cachedTokens: 3, costUsd: 0.002, lastInput: 11, contextWindow: 1000
    });
  });

  test('keeps cost and reviews across page loads', () => {
    const store = new Map<string, string>();
    const storage = {
      getItem: (k: string) => store.get(k) ?? null,
      setItem: (k: string, v: string) => void store.set(k, v)
    };
    const c = new Conversations(storage).get({ path: 'n.ipynb' });
    c.start(askStart());
    c.follow(waiting([edit('c1', 'cell-0')]));
    c.end(askEnd({ usage: { input_tokens: 22, output_tokens: 14, cached_tokens: 0, cost_usd: null } }));
    const again = new Conversations(storage).get({ path: 'n.ipynb' });
    assert.equal(again.asks[0].cost?.inputTokens, 22);
    assert.equal(again.asks[0].reviews?.[0].edits[0].callId, 'c1');
  });
});
