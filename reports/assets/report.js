(function(){
const cmps=JSON.parse(document.getElementById('comparisons').textContent);
const q=document.getElementById('q'),boxes=[...document.querySelectorAll('#statuses input')];
function state(){const p=new URLSearchParams(location.hash.slice(1));
 return {q:(p.get('q')||'').toLowerCase(),status:(p.get('status')||'').split(',').filter(Boolean)};}
function apply(){const s=state();q.value=s.q;boxes.forEach(b=>b.checked=s.status.includes(b.value));
 let shown=0,all=0;
 document.querySelectorAll('table.ft tbody tr').forEach(tr=>{all++;
  const text=tr.textContent.toLowerCase()+' '+[...tr.cells].map(c=>c.title||'').join(' ').toLowerCase();
  const okText=!s.q||text.includes(s.q);
  const okStatus=!s.status.length||[...tr.cells].some(c=>s.status.some(x=>c.classList.contains('s-'+x)));
  tr.hidden=!(okText&&okStatus);if(!tr.hidden)shown++;});
 document.getElementById('shown').textContent=shown+' of '+all+' rows';}
function write(){const p=new URLSearchParams();if(q.value)p.set('q',q.value);
 const st=boxes.filter(b=>b.checked).map(b=>b.value);if(st.length)p.set('status',st.join(','));
 history.replaceState(null,'','#'+p.toString());apply();}
q.addEventListener('input',write);boxes.forEach(b=>b.addEventListener('change',write));
window.addEventListener('hashchange',apply);
function key(t){const m=t.replace(/,/g,'').match(/^[^0-9-]*(-?[0-9.]+(e-?[0-9]+)?)/i);return m?parseFloat(m[1]):null;}
document.querySelectorAll('table thead th').forEach((th,col)=>th.addEventListener('click',()=>{
 const table=th.closest('table'),body=table.tBodies[0],i=[...th.parentNode.cells].indexOf(th);
 const dir=th.getAttribute('aria-sort')==='ascending'?-1:1;
 th.parentNode.querySelectorAll('th').forEach(h=>h.removeAttribute('aria-sort'));
 th.setAttribute('aria-sort',dir>0?'ascending':'descending');
 const rows=[...body.rows],text=r=>(r.cells[i]?(r.cells[i].textContent||r.cells[i].title):'');
 const num=rows.every(r=>key(text(r))!==null);
 rows.sort((a,b)=>dir*(num?key(text(a))-key(text(b)):text(a).localeCompare(text(b),undefined,{numeric:true})));
 rows.forEach(r=>body.appendChild(r));}));
const panel=document.getElementById('detail'),out=document.getElementById('detail-body');
function esc(s){return String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function show(c){const rows=[['equal',c.equal],['differing elements',c.differ.toLocaleString()+' of '+c.numel.toLocaleString()],
 ['max |a-b|',c.max_abs],['largest ULP distance',c.ulp_max],['first differing index',c.first_differ&&'['+c.first_differ.join(', ')+']'],
 ['repeatable',c.repeatable===undefined?'not checked':c.repeatable],['most elements differing between runs',c.repeat_differ],['error',c.error]];
 let h='<b>'+esc(c.where)+'</b><table>'+rows.filter(r=>r[1]!==undefined&&r[1]!==null).map(r=>'<tr><th>'+esc(r[0])+'</th><td>'+esc(r[1])+'</td></tr>').join('')+'</table>';
 if(c.ulp_hist){const m=Math.max(...Object.values(c.ulp_hist));h+='<b>ULP histogram</b> (differing elements per distance)';
  for(const [k,v] of Object.entries(c.ulp_hist))h+='<div class="bar"><span>'+esc(k)+'</span><i style="width:'+(200*v/m)+'px"></i>'+v.toLocaleString()+'</div>';}
 out.innerHTML=h;panel.hidden=false;}
document.addEventListener('click',e=>{const c=e.target.closest('[data-c]');if(c)show(cmps[+c.dataset.c]);});
document.getElementById('close').addEventListener('click',()=>panel.hidden=true);
apply();
})();
