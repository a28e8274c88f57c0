-- A quick fix that appends a key at the end of a file ending in a line break: the search config of a published
-- torchtitan run without its release (HP536). The fix's edit lands after the last line, with no blank line after
-- it and nothing glued onto the last value; the finding is then gone.
local T = require('hp_test')

local function summary(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, tostring(d.code) .. ': ' .. d.message)
  end
  return out
end

local function hp536(buf)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if tostring(d.code) == 'HP536' then
      return d
    end
  end
end

T.run(function()
  local hp = require('hp_lsp')
  hp.setup({ cmd = { os.getenv('HP_LSP_PYTHON'), '-m', 'hp_lsp' } })
  vim.cmd('edit ' .. vim.fn.fnameescape(os.getenv('HP_E2E_FILE')))
  local buf = vim.api.nvim_get_current_buf()
  local before = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local diag = T.wait(30000, function() return hp536(buf) end)
  T.require(diag ~= nil, 'HP536 on a search config that names no torchtitan release', summary(buf))
  -- the LSP diagnostic the server published (vim.diagnostic keeps it in user_data on newer Neovims)
  local lsp = vim.deepcopy((diag.user_data or {}).lsp or {})
  lsp.range = lsp.range or { start = { line = diag.lnum, character = diag.col },
    ['end'] = { line = diag.end_lnum or diag.lnum, character = diag.end_col or diag.col } }
  lsp.message = lsp.message or diag.message
  lsp.severity = lsp.severity or diag.severity
  lsp.source = lsp.source or diag.source
  lsp.code = lsp.code or diag.code
  local client = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = buf })[1] or vim.lsp.get_active_clients({ bufnr = buf })[1]
  local responses = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) }, range = lsp.range,
    context = { diagnostics = { lsp } },
  }, 15000) or {}
  local fix
  for _, response in pairs(responses) do
    for _, action in ipairs(response.result or {}) do
      if action.title == 'Set `framework_version` to main' then
        fix = action
      end
    end
  end
  T.require(fix ~= nil and fix.edit ~= nil, 'HP536 offers to state the release priced', responses)
  vim.lsp.util.apply_workspace_edit(fix.edit, client.offset_encoding)
  local after = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local expected = vim.deepcopy(before)
  table.insert(expected, '  framework_version: main')
  T.eq(after, expected, 'the key is the new last line: nothing glued onto the last value, no blank line after it')
  T.check(T.wait(30000, function() return hp536(buf) == nil end), 'HP536 is gone once the release is stated',
    summary(buf))
end)
