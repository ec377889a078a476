/**
 * Under a JupyterHub with the jupyter-ci service: the user's spending this month and today,
 * against their budgets, as the service keeps it (`GET /jupyter-ci/spending`, docs/hub.md).
 * Nothing is shown on a server that is not under such a Hub.
 */
import * as React from 'react';

import { fetchHubSpending, IHubLimit, IHubSpending, IModelSpending } from './api';
import { money, tokens } from './cost';

/** Seconds between readings while the panel is open. */
const EVERY_S = 60;

/** "On the Hub this month: $1.23 of $20.00 · today 12,345 of 2,000,000 tokens". */
export function hubSpendingText(spending: IHubSpending): string {
  const limits = new Map((spending.limits ?? []).map(l => [l.name, l]));
  const month = sum(spending.this_month);
  const today = sum(spending.today);
  const parts = [
    `this month ${money(month.usd)}${of(limits.get('usd_per_month'), money)}`,
    `${tokens(month.tokens)}${of(limits.get('tokens_per_month'), tokens)} tokens`,
    `today ${money(today.usd)}${of(limits.get('usd_per_day'), money)}`,
    `${tokens(today.tokens)}${of(limits.get('tokens_per_day'), tokens)} tokens`
  ];
  return `On the Hub: ${parts.join(' · ')}`;
}

function of(limit: IHubLimit | undefined, show: (n: number) => string): string {
  return limit && limit.limit > 0 ? ` of ${show(limit.limit)}` : '';
}

function sum(spent: readonly IModelSpending[]): { tokens: number; usd: number } {
  return spent.reduce(
    (total, s) => ({
      tokens: total.tokens + s.input_tokens + s.output_tokens,
      usd: total.usd + s.cost_usd
    }),
    { tokens: 0, usd: 0 }
  );
}

/** The line, read again after each ask the panel sees end, and once a minute. */
export function HubSpending(props: { asks: number }): JSX.Element | null {
  const [spending, setSpending] = React.useState<IHubSpending | null>(null);
  React.useEffect(() => {
    let live = true;
    const read = () => void fetchHubSpending().then(s => live && setSpending(s));
    read();
    const timer = setInterval(read, EVERY_S * 1000);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [props.asks]);
  if (spending === null) {
    return null;
  }
  return (
    <div
      className="jp-ci-cost-total"
      data-jupyter-ci="hub-spending"
      title="What your asks cost on this JupyterHub, and your budgets (UTC days and months)"
    >
      {hubSpendingText(spending)}
    </div>
  );
}
