/**
 * The bodies of a question in its cell, built from text nodes only (what the kernel sends
 * is never parsed as HTML): a step's text with Run, Edit, Skip, Stop; a plan as editable
 * text with Approve and Stop. The edits' bodies are reviewbox.ts's, built with the same
 * parts.
 *
 * Every button has a `data-jupyter-ci` attribute for browser tests.
 */
import { approvalText, IPendingApproval } from './question';
import type { NotebookQuestions } from './questions';

/** An element with a class and, when given, its text. */
export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text) {
    node.textContent = text;
  }
  return node;
}

/** A button with a label, a class, a test name and what it does. */
export function button(
  label: string,
  className: string,
  name: string,
  onClick: () => void
): HTMLButtonElement {
  const node = element('button', className, label);
  node.type = 'button';
  node.dataset.jupyterCi = name;
  node.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return node;
}

const HOST_STYLE =
  'padding: 6px 8px; margin: 4px 0 4px 64px; border-left: 3px solid var(--jp-warn-color1);' +
  'background: var(--jp-layout-color2); font-size: var(--jp-ui-font-size1);';

/** Fill `host` with a waiting step or plan: what waits, the plan's text, the buttons. */
export function fillApproval(
  host: HTMLElement,
  pending: IPendingApproval,
  questions: NotebookQuestions
): void {
  host.className = 'jp-ci-approval';
  host.dataset.jupyterCi = 'approval';
  host.dataset.jupyterCiKind = pending.kind;
  host.style.cssText = HOST_STYLE;
  const text = element('div', '', approvalText(pending));
  text.style.marginBottom = '6px';
  const parts: HTMLElement[] = [text];
  if (pending.kind === 'plan') {
    parts.push(planBox(pending, questions));
  }
  parts.push(approvalButtons(pending, questions));
  host.replaceChildren(...parts);
}

/** The plan as editable text (a textarea: never rendered). */
function planBox(pending: IPendingApproval, questions: NotebookQuestions): HTMLElement {
  const box = element('textarea', '');
  box.value = pending.draft;
  box.dataset.jupyterCi = 'plan';
  box.rows = Math.min(16, Math.max(3, pending.draft.split('\n').length + 1));
  box.style.cssText =
    'width: 100%; box-sizing: border-box; font-family: var(--jp-code-font-family);';
  box.addEventListener('input', () => questions.setDraft(pending.askId, box.value));
  // Keys typed here are the plan's, not notebook shortcuts.
  box.addEventListener('keydown', event => event.stopPropagation());
  return box;
}

function approvalButtons(pending: IPendingApproval, questions: NotebookQuestions): HTMLElement {
  const row = document.createElement('div');
  const { askId } = pending;
  const add = (label: string, name: string, onClick: () => void, accept = false): void => {
    const kind = accept ? 'jp-mod-accept' : 'jp-mod-reject';
    const node = button(label, `jp-Button jp-mod-styled ${kind}`, name, onClick);
    node.style.marginRight = '6px';
    row.appendChild(node);
  };
  if (pending.kind === 'plan') {
    add('Approve', 'approve-plan', () => questions.answer(askId, 'run'), true);
  } else {
    const run = pending.editing ? 'Run edited code' : 'Run';
    add(run, 'approve-run', () => questions.answer(askId, 'run'), true);
    if (!pending.editing) {
      add('Edit', 'approve-edit', () => questions.edit(askId));
    }
    add('Skip', 'approve-skip', () => questions.answer(askId, 'skip'));
  }
  add('Stop', 'approve-stop', () => questions.answer(askId, 'stop'));
  return row;
}
