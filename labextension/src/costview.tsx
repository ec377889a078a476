/**
 * The panel's cost lines: each ask's tokens and price, the notebook's total, and how full
 * the model's context window was at the last turn (what the next ask starts from).
 *
 * Every element tests look for has a `data-jupyter-ci` attribute.
 */
import * as React from 'react';

import type { IAskView } from './askview';
import { contextText, costText, total, totalText } from './cost';

/** "12,345 in (2,000 cached) · 678 out · $0.0123" under an ask. */
export function AskCost(props: { ask: IAskView }): JSX.Element | null {
  const cost = props.ask.cost;
  if (!cost) {
    return null;
  }
  const priced = cost.costUsd !== null;
  return (
    <div
      className="jp-ci-cost"
      data-jupyter-ci="cost"
      title={priced ? 'Tokens and price of this ask' : 'This model has no price: tokens only'}
    >
      {costText(cost)}
    </div>
  );
}

/** The notebook's total, and the context the next ask starts from. */
export function NotebookCost(props: { asks: readonly IAskView[] }): JSX.Element | null {
  const { asks } = props;
  const sum = totalText(total(asks.map(ask => ask.cost)));
  const last = [...asks].reverse().find(ask => ask.cost);
  const context = contextText(last?.cost);
  if (sum === null && context === null) {
    return null;
  }
  return (
    <div className="jp-ci-cost-total">
      {sum !== null ? (
        <div data-jupyter-ci="cost-total" title="All the asks this panel keeps for this notebook">
          This notebook: {sum}
        </div>
      ) : null}
      {context !== null ? (
        <div
          data-jupyter-ci="context"
          title="How much of the model's context window the last turn filled"
        >
          {context}
        </div>
      ) : null}
    </div>
  );
}
