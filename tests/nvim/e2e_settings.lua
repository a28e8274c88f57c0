-- The settings path on its own: a train.yaml with no search config beside it gets its cluster from
-- setup{ settings = ... } (init_options and the didChangeConfiguration pushed on init), and
-- update_settings() changes the budget of the running server.
local T = require('hp_test')

local function diagnostics(buf)
  return vim.diagnostic.get(buf)
end

local function summary(buf)
  local out = {}
  for _, d in ipairs(diagnostics(buf)) do
    table.insert(out, tostring(d.code) .. ': ' .. d.message)
  end
  return out
end

T.run(function()
  local hp = require('hp_lsp')
  local cluster = { numNodes = 128, cardsPerNode = 8, deviceType = 'H100' }
  hp.setup({
    cmd = { os.getenv('HP_LSP_PYTHON'), '-m', 'hp_lsp' },
    settings = { hpLsp = { cluster = cluster, memoryLimitGb = 76 } },
  })
  vim.cmd('edit ' .. vim.fn.fnameescape(os.getenv('HP_E2E_FILE')))
  local buf = vim.api.nvim_get_current_buf()

  local function wait_for(pred, what)
    local ok = T.wait(30000, function()
      for _, d in ipairs(diagnostics(buf)) do
        if pred(d) then
          return true
        end
      end
    end)
    T.check(ok, what, summary(buf))
    return ok
  end

  wait_for(function(d) return d.code == 'HP611' end, 'the cluster from the settings lets the server search (HP611)')
  local hp611 = 0
  for _, d in ipairs(diagnostics(buf)) do
    if d.code == 'HP611' then
      hp611 = hp611 + 1
    end
  end
  T.check(hp611 == 1, 'HP611 shown once (one client, one publish per finding)', summary(buf))
  T.check(not vim.tbl_contains(vim.tbl_map(function(d) return d.code end, diagnostics(buf)), 'HP302'),
    'no "no cluster stated" note', summary(buf))

  hp.update_settings({ hpLsp = { cluster = cluster, memoryLimitGb = 4 } })
  wait_for(function(d)
    return d.severity == vim.diagnostic.severity.ERROR and d.message:find('4 GiB') ~= nil
  end, 'update_settings: the 4 GiB budget reaches the server')
end)
