/**
 * What asks cost: tokens in (cached) and out, and money where the model has a price, added
 * up from the kernel's `usage` events and an ask's end; per ask, per notebook, and how full
 * the model's context window was at the last turn. The kernel prices (the server's price
 * table, `c.JupyterCI.prices`); nothing here knows a price.
 */
import type { IAskUsage, IUsage } from './protocol';

/** The tokens and price of one ask so far. */
export interface IAskCost {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  /** In US dollars; null for a model without a price. */
  costUsd: number | null;
  /** The input tokens of the ask's last model turn: how full the context was. */
  lastInput: number;
  /** The model's context window in tokens, when the kernel knows it. */
  contextWindow: number | null;
}

/** The cost of an ask after one more model turn. */
export function addTurn(cost: IAskCost | undefined, msg: IUsage): IAskCost {
  const before = cost ?? {
    inputTokens: 0,
    outputTokens: 0,
    cachedTokens: 0,
    costUsd: null,
    lastInput: 0,
    contextWindow: null
  };
  return {
    inputTokens: before.inputTokens + count(msg.input_tokens),
    outputTokens: before.outputTokens + count(msg.output_tokens),
    cachedTokens: before.cachedTokens + count(msg.cached_tokens),
    costUsd: dollars(msg.ask_cost_usd),
    lastInput: count(msg.input_tokens),
    contextWindow: positive(msg.context_window) ?? before.contextWindow
  };
}

/** The cost of an ask from its end's totals (they win over the turns added up here). */
export function atEnd(cost: IAskCost | undefined, usage: IAskUsage): IAskCost {
  return {
    inputTokens: count(usage.input_tokens),
    outputTokens: count(usage.output_tokens),
    cachedTokens: count(usage.cached_tokens),
    costUsd: dollars(usage.cost_usd),
    lastInput: cost?.lastInput ?? 0,
    contextWindow: cost?.contextWindow ?? null
  };
}

/** The cost an ask record keeps (its `usage`, as ask_end sent it), or null for none. */
export function recordedCost(usage: unknown): IAskCost | null {
  if (typeof usage !== 'object' || usage === null || Array.isArray(usage)) {
    return null;
  }
  const cost = atEnd(undefined, usage as IAskUsage);
  return cost.inputTokens > 0 || cost.outputTokens > 0 ? cost : null;
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0;
}

function dollars(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

function positive(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

/** "12,345" */
export function tokens(n: number): string {
  return n.toLocaleString('en-US');
}

/** "$0.0123" below a dollar, "$1,234.56" from one on (as the kernel's cell log says it). */
export function money(usd: number): string {
  if (usd >= 1) {
    const cents = { minimumFractionDigits: 2, maximumFractionDigits: 2 };
    return `$${usd.toLocaleString('en-US', cents)}`;
  }
  return `$${usd.toFixed(4)}`;
}

/** "12,345 in (2,000 cached) · 678 out · $0.0123"; no money for a model without a price. */
export function costText(cost: IAskCost): string {
  const cached = cost.cachedTokens > 0 ? ` (${tokens(cost.cachedTokens)} cached)` : '';
  const parts = [`${tokens(cost.inputTokens)} in${cached}`, `${tokens(cost.outputTokens)} out`];
  if (cost.costUsd !== null) {
    parts.push(money(cost.costUsd));
  }
  return parts.join(' · ');
}

/** The asks of a notebook added up. */
export interface ITotal {
  asks: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  /** What the priced asks cost (0 when none was). */
  costUsd: number;
  /** How many asks used a model without a price. */
  unpriced: number;
}

/** Add up the costs of a notebook's asks (those without any are left out). */
export function total(costs: readonly (IAskCost | null | undefined)[]): ITotal {
  const sum: ITotal = {
    asks: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0, costUsd: 0, unpriced: 0
  };
  for (const cost of costs) {
    if (!cost) {
      continue;
    }
    sum.asks++;
    sum.inputTokens += cost.inputTokens;
    sum.outputTokens += cost.outputTokens;
    sum.cachedTokens += cost.cachedTokens;
    if (cost.costUsd === null) {
      sum.unpriced++;
    } else {
      sum.costUsd += cost.costUsd;
    }
  }
  return sum;
}

/** "3 asks · 30,000 in · 1,200 out · $0.0456 (+ 1 ask without a price)", or null for none. */
export function totalText(sum: ITotal): string | null {
  if (sum.asks === 0) {
    return null;
  }
  const cached = sum.cachedTokens > 0 ? ` (${tokens(sum.cachedTokens)} cached)` : '';
  const parts = [
    `${sum.asks} ${sum.asks === 1 ? 'ask' : 'asks'}`,
    `${tokens(sum.inputTokens)} in${cached}`,
    `${tokens(sum.outputTokens)} out`
  ];
  const priced = sum.asks - sum.unpriced;
  if (priced > 0) {
    const rest = sum.unpriced > 0 ? ` (+ ${sum.unpriced} without a price)` : '';
    parts.push(money(sum.costUsd) + rest);
  }
  return parts.join(' · ');
}

/** "200k", "1M", "1.5M", "8,192": a context window's size. */
export function windowText(n: number): string {
  if (n >= 1_000_000) {
    return `${Number((n / 1_000_000).toFixed(1))}M`;
  }
  if (n >= 10_000) {
    return `${Number((n / 1000).toFixed(0))}k`;
  }
  return tokens(n);
}

/** "context 23% of 200k": how full the window was at the ask's last turn (null: unknown). */
export function contextText(cost: IAskCost | null | undefined): string | null {
  if (!cost || cost.contextWindow === null || cost.lastInput <= 0) {
    return null;
  }
  const percent = Math.round((100 * cost.lastInput) / cost.contextWindow);
  return `context ${percent}% of ${windowText(cost.contextWindow)}`;
}
