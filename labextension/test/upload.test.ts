/**
 * Naming uploaded files and mentioning them in the prompt.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { mentionFiles, numbered, safeName } from '../src/upload';

describe('safeName', () => {
  test('keeps a plain name', () => {
    assert.equal(safeName('sales 2024.csv'), 'sales 2024.csv');
  });
  test('drops any folder part, so an upload stays in data/', () => {
    assert.equal(safeName('../../etc/passwd'), 'passwd');
    assert.equal(safeName('C:\\Users\\me\\x.csv'), 'x.csv');
  });
  test('never returns an empty or special name', () => {
    assert.equal(safeName('..'), 'upload');
    assert.equal(safeName('a/'), 'upload');
    assert.equal(safeName('\u0001'), 'upload');
  });
});

describe('numbered', () => {
  test('puts the number before the extension', () => {
    assert.equal(numbered('sales.csv', 1), 'sales (1).csv');
    assert.equal(numbered('README', 2), 'README (2)');
  });
});

describe('mentionFiles', () => {
  const file = { relative: 'data/sales.csv', path: 'work/data/sales.csv', size: 3 };
  test('leaves a prompt without files as it is', () => {
    assert.equal(mentionFiles('plot it', []), 'plot it');
  });
  test('names each file relative to the notebook', () => {
    assert.equal(
      mentionFiles('plot it ', [file, { ...file, relative: 'data/b.json' }]),
      'plot it\n\nFiles uploaded for this: `data/sales.csv`, `data/b.json`'
    );
    assert.equal(mentionFiles('plot it', [file]), 'plot it\n\nFile uploaded for this: `data/sales.csv`');
  });
});
