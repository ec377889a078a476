/**
 * What asks cost, as the panel shows it (cost.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  addTurn,
  atEnd,
  contextText,
  costText,
  IAskCost,
  money,
  recordedCost,
  total,
  totalText,
  windowText
} from '../src/cost';
import type { IUsage } from '../src/protocol';
import { recordedAsks } from '../src/records';

function usage(fields: Partial<IUsage>): IUsage {
  return { type: 'usage', ask_id: 'a1', input_tokens: 0, output_tokens: 0, ask_tokens: 0, ...fields };
}

function cost(fields: Partial<IAskCost>): IAskCost {
  return {
    inputTokens: 0, outputTokens: 0, cachedTokens: 0, costUsd: null, lastInput: 0,
    contextWindow: null, ...fields
  };
}

describe('an ask cost', () => {
  test('adds up the turns; the ask price is the kernel running total', () => {
    let c = addTurn(undefined, usage({
      input_tokens: 10_000, output_tokens: 300, cached_tokens: 0, cost_usd: 0.006,
      ask_cost_usd: 0.006, context_window: 200_000
    }));
    c = addTurn(c, usage({
      input_tokens: 2_345, output_tokens: 378, cached_tokens: 2_000, cost_usd: 0.0063,
      ask_cost_usd: 0.0123, context_window: 200_000
    }));
    assert.deepEqual(c, cost({
      inputTokens: 12_345, outputTokens: 678, cachedTokens: 2_000, costUsd: 0.0123,
      lastInput: 2_345, contextWindow: 200_000
    }));
    assert.equal(costText(c), '12,345 in (2,000 cached) · 678 out · $0.0123');
  });

  test('a model without a price shows tokens without money', () => {
    const unpriced = { cost_usd: null, ask_cost_usd: null };
    const c = addTurn(undefined, usage({ input_tokens: 11, output_tokens: 7, ...unpriced }));
    assert.equal(c.costUsd, null);
    assert.equal(costText(c), '11 in · 7 out');
  });

  test('a kernel before prices sends only tokens', () => {
    const c = addTurn(undefined, usage({ input_tokens: 11, output_tokens: 7, ask_tokens: 18 }));
    assert.equal(costText(c), '11 in · 7 out');
    assert.equal(contextText(c), null);
  });

  test('the end totals win, and keep what the turns said of the context', () => {
    const turns = addTurn(undefined, usage({ input_tokens: 100, output_tokens: 5, context_window: 8192 }));
    const end = atEnd(turns, { input_tokens: 120, output_tokens: 9, cached_tokens: 20, cost_usd: 1.5 });
    assert.deepEqual(end, cost({
      inputTokens: 120, outputTokens: 9, cachedTokens: 20, costUsd: 1.5, lastInput: 100, contextWindow: 8192
    }));
    assert.equal(costText(end), '120 in (20 cached) · 9 out · $1.50');
  });
});

describe('money', () => {
  test('four decimals below a dollar, cents from one on, as the kernel writes it', () => {
    assert.equal(money(0.0123), '$0.0123');
    assert.equal(money(0.01234567), '$0.0123');
    assert.equal(money(0.5), '$0.5000');
    assert.equal(money(1.234), '$1.23');
    assert.equal(money(1234.5), '$1,234.50');
    assert.equal(money(0), '$0.0000');
    assert.equal(money(0.00004), '$0.0000');
  });
});

describe('a notebook total', () => {
  test('adds priced and unpriced asks, money from the priced ones only', () => {
    const sum = total([
      cost({ inputTokens: 1000, outputTokens: 100, costUsd: 0.01 }),
      undefined,
      cost({ inputTokens: 500, outputTokens: 50, cachedTokens: 200, costUsd: 0.0023 }),
      cost({ inputTokens: 11, outputTokens: 7 })
    ]);
    assert.deepEqual(sum, {
      asks: 3, inputTokens: 1511, outputTokens: 157, cachedTokens: 200, costUsd: 0.0123, unpriced: 1
    });
    assert.equal(totalText(sum), '3 asks · 1,511 in (200 cached) · 157 out · $0.0123 (+ 1 without a price)');
  });

  test('only unpriced asks: tokens only; none at all: nothing', () => {
    assert.equal(totalText(total([cost({ inputTokens: 11, outputTokens: 7 })])), '1 ask · 11 in · 7 out');
    assert.equal(totalText(total([])), null);
  });
});

describe('the context window', () => {
  test('how full the last turn left it', () => {
    assert.equal(contextText(cost({ lastInput: 46_000, contextWindow: 200_000 })), 'context 23% of 200k');
    assert.equal(contextText(cost({ lastInput: 10, contextWindow: 1_000_000 })), 'context 0% of 1M');
    assert.equal(contextText(cost({ lastInput: 0, contextWindow: 200_000 })), null);
    assert.equal(contextText(null), null);
  });

  test('window sizes', () => {
    assert.equal(windowText(200_000), '200k');
    assert.equal(windowText(128_000), '128k');
    assert.equal(windowText(1_048_576), '1M');
    assert.equal(windowText(1_500_000), '1.5M');
    assert.equal(windowText(8192), '8,192');
  });
});

describe('the cost an ask record keeps', () => {
  test('is read from its usage, for a browser that did not see the ask', () => {
    const usage = { input_tokens: 12_345, output_tokens: 678, cached_tokens: 2_000, cost_usd: 0.0123 };
    const record = { ask_id: 'k1', status: 'done', model: 'openai:m', answer: 'ok', usage };
    const [ask] = recordedAsks([
      { id: 'a', cellType: 'code', source: '%%ask\nplot', metadata: { jupyter_ci: record } }
    ]);
    assert.ok(ask.cost);
    assert.equal(costText(ask.cost), '12,345 in (2,000 cached) · 678 out · $0.0123');
  });

  test('none for a record without usage, or with nothing spent', () => {
    assert.equal(recordedCost(undefined), null);
    assert.equal(recordedCost('12 tokens'), null);
    assert.equal(recordedCost({ input_tokens: 0, output_tokens: 0, cached_tokens: 0, cost_usd: null }), null);
  });
});
