/**
 * The user's spending under a JupyterHub, as the panel shows it (hubspending.tsx).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { hubSpendingText } from '../src/hubspending';

const spent = { turns: 3, cached_tokens: 0 };
const resets = '2026-12-01T00:00:00+00:00';

function model(name: string, input: number, output: number, usd: number) {
  return { model: name, input_tokens: input, output_tokens: output, cost_usd: usd, ...spent };
}

test('the month and the day are shown against the budgets the policy sets', () => {
  const text = hubSpendingText({
    user: 'ada',
    day: '2026-11-30',
    month: '2026-11',
    today: [model('openai:gpt-5-mini', 900, 100, 0.5)],
    this_month: [
      model('openai:gpt-5-mini', 9000, 1000, 2.5),
      model('anthropic:claude-haiku-4-5', 500, 500, 0.25)
    ],
    limits: [
      { name: 'usd_per_month', limit: 20, used: 2.75, resets, source: 'default' },
      { name: 'tokens_per_day', limit: 2000000, used: 1000, resets, source: 'default' }
    ]
  });
  assert.equal(
    text,
    'On the Hub: this month $2.75 of $20.00 · 11,000 tokens · today $0.5000 · ' +
      '1,000 of 2,000,000 tokens'
  );
});
