/* vmtax serve: sortable tables (a page reads the same without it) */
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var table = th.closest('table'), body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    rows.sort(function(a, b){
      var x = a.cells[col], y = b.cells[col];
      var u = parseFloat(x.dataset.v), v = parseFloat(y.dataset.v);
      if (!isNaN(u) && !isNaN(v)) return dir * (u - v);
      return dir * x.textContent.localeCompare(y.textContent);
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});
