/**
 * The words of a notebook's box (box.ts) and the hosts offered to allow: once per host and
 * notebook.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { IBoxStatus } from '../src/api';
import { badgeText, BOX_LABEL, boxLine, HostOffers, refusedText, UNBOX_WARNING } from '../src/box';

function status(boxed: boolean, more: Partial<IBoxStatus> = {}): IBoxStatus {
  return {
    kernel: 'k',
    boxed,
    reason: '',
    notebook: 'work/a.ipynb',
    setting: 'auto',
    may_unbox: true,
    network: [],
    refused: [],
    ...more
  };
}

test('the badge and the line say whether the kernel is boxed, and what that means', () => {
  assert.equal(badgeText(null), '');
  assert.equal(boxLine(null), '');
  assert.equal(badgeText(status(true)), 'Boxed');
  assert.equal(badgeText(status(false)), 'Unboxed');
  const boxed = boxLine(status(true, { network: ['pypi.org', 'files.pythonhosted.org'] }));
  assert.match(boxed, /^Boxed: .*without its secrets, and reaches only pypi\.org, files\.pythonhosted\.org/);
  const many = boxLine(status(true, { network: ['a', 'b', 'c', 'd'] }));
  assert.match(many, /only a, b, c, …/);
  const unboxed = boxLine(status(false, { reason: "you chose 'Run this notebook unboxed' for it" }));
  assert.match(unboxed, /^Unboxed \(you chose .*\): the code an ask runs here has all your rights/);
  assert.ok(unboxed.endsWith(`"${BOX_LABEL}" boxes it.`));
  // Where the server requires boxes, it does not offer what it would refuse.
  assert.ok(!boxLine(status(false, { may_unbox: false })).includes(BOX_LABEL));
  assert.match(UNBOX_WARNING, /all your rights.*~\/\.ssh/);
});

test('each refused host is offered once per notebook', () => {
  const offers = new HostOffers();
  assert.deepEqual(offers.take('a.ipynb', ['example.com:443', 'example.com:443']), ['example.com:443']);
  assert.deepEqual(offers.take('a.ipynb', ['example.com:443', 'data.gov:443']), ['data.gov:443']);
  assert.deepEqual(offers.take('a.ipynb', ['data.gov:443']), []);
  // Another notebook is asked on its own.
  assert.deepEqual(offers.take('b.ipynb', ['example.com:443']), ['example.com:443']);
  assert.equal(
    refusedText('work/a.ipynb', 'example.com:443'),
    'The box of a.ipynb refused a connection to example.com:443: it reaches only the hosts you allow.'
  );
});
